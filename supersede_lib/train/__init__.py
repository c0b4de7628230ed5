"""GRPO training on the rollout core: the bounded-memory agent's every turn becomes a sample whose
advantage is its trajectory's, rewarded by the same matcher as evaluation.

`config` (settings, presets, file names), `curriculum` (difficulty ladder, episodes), `grpo` (the
TRL trainer, reward, callbacks; imports TRL), `run` (load the policy, train, resume, read runs).
"""
