"""GRPO training on the rollout core: the bounded-memory agent's every turn becomes a sample whose
advantage is its trajectory's, rewarded by the same matcher as evaluation.

`config` (settings, presets, file names), `curriculum` (difficulty ladder, episodes), `grpo` (the
TRL trainer; imports TRL), `samples` (what it trains on), `rewards` (the reward and the advantages),
`callbacks` (zero-advantage stop, metrics file), `run` (load the policy, train, resume, read runs),
`processes` (the processes of a data-parallel launch), `gpu_check` (the GPU path in two steps). The
command line that trains a profile's runs (`python -m supersede_lib train`) is `cli.train`: it reads
profiles, which sit above this package.
"""
