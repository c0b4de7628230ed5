"""Evaluation: run a condition over episodes and grade it.

`runner` drives the rollout core over many questions concurrently and writes one row per question;
`matcher` (a package; `score_episode_answer` is its face) grades an answer against the current and
superseded values (the reward), and `agreement` checks it against the human labels in `labels/`;
`judge` is the LongMemEval yes/no LLM judge; `diagnostics` says why a bounded-memory answer failed;
`stats` holds the paired tests and intervals.
"""
