"""Human labels of the answers the matcher grades, and the tools that make and use them.

`data/` holds the labels (`labelled_answers.jsonl`, one per distinct answer; `blind_batches.jsonl`,
one line per blind batch graded once; `known_disagreements.jsonl`, the matcher's misses with why).
`agreement` grades the labelled answers with the matcher and measures agreement, `labelled_episodes`
rebuilds the episodes they answer, `label_batch` makes blind packets and merges their labels, and
`validation` runs the matcher (and embedded judges) against the labels.
"""
