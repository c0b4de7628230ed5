"""Supersede: measure and train down the supersession gap of LLM agents.

Subpackages by concern: `data` (LongMemEval and the synthetic generator -> `Episode`s),
`models` (one chat protocol over OpenAI-compatible servers, embedded llama.cpp, transformers and a
response cache), `eval` (the runner, the matcher/reward, judge, diagnostics, statistics), `train`
(GRPO on the rollout core), `studies` (notebooks 01-07 and their profiles), `present` (figures,
explorer). At the top: `episode` (the shared record), `prompts` + `rollout` (the no-re-feed state
machines every driver uses), `environment` (verifiers), `bench` and `reproduce`.
"""

__version__ = "0.1.0"
