"""Supersede: measure and train down the supersession gap of LLM agents.

Modules, one concern each: `episode` (the shared record), `data` (LongMemEval),
`synthetic` (procedural timelines), `scoring` (matcher and reward), `stats`,
`prompts` + `rollout` (the rollout core), `chat` + `clients` + `cache` (models),
`agents` (run_condition), `judge`, `environment` (verifiers), `training` (GRPO),
`plots`, `profiles` and `report`.
"""

__version__ = "0.1.0"
