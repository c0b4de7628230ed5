"""GRPO training on the rollout core: the bounded-memory agent's every turn becomes a sample whose
advantage is its trajectory's, rewarded by the same matcher as evaluation.

`config` (settings, presets, file names), `curriculum` (difficulty ladder, episodes), `grpo` (the
TRL trainer, reward, callbacks; imports TRL), `run` (load the policy, train, resume, read runs),
`processes` (the processes of a data-parallel launch), `__main__` (`python -m supersede_lib.train`:
a profile's runs from a shell, on one GPU or data-parallel under `accelerate launch`).
"""
