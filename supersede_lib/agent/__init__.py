"""The agent core, the bottom layer: it imports nothing else from `supersede_lib`.

`episode` (Turn, Session, Episode: the shared record), `messages` (the chat `Message` type),
`prompts` (every prompt the agent sees),
`notes_edits` (line edits applied to the notes) and `rollout` (the no-re-feed state machines that
evaluation, the verifiers environment and GRPO training all drive).
"""
