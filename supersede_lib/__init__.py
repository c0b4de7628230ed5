"""Supersede: measure and train down the supersession gap of LLM agents.

Packages by concern, in import layers (`LAYERS`, bottom first): `agent` (the shared `Episode`
record, the prompts, the no-re-feed rollout state machines every driver uses); `data` (LongMemEval
and the synthetic generator -> `Episode`s); `models` (one chat protocol over OpenAI-compatible
servers, embedded llama.cpp, transformers and a response cache); `eval` (the runner, the
matcher/reward, judge, diagnostics, statistics); `environment` (verifiers), `train` (GRPO on the
rollout core) and `present` (figures, explorer); `profiles` (a YAML profile: the whole experiment,
its models and where its files go); `results` (the tables every study writes and compares);
`instruction` (GEPA on the memory instruction, beside `train`);
`studies` (notebooks 01-10), `diagnosis` (`diagnose`'s engine: Table 1 for any endpoint on one page); `labelling` (the human labels and their tools); `reproduce` (the
committed record: run, replay, verify, report); `prereg` (the pre-registered training proof); `bench`
(speed benchmarks); and at the top what a shell runs: `cli` (`python -m supersede_lib <command>`).
"""

__version__ = "0.1.0"

# The import rule (docs/ARCHITECTURE.md; tests/test_imports.py checks every import, lazy ones too):
# a module imports its own package and the layers below it, never a peer package in its own layer
# nor anything above, so the graph has no cycles and the lower layers can be used without the upper.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("agent",),
    ("data",),
    ("models",),
    ("eval",),
    ("environment", "train", "present", "instruction"),
    ("profiles",),
    ("results",),
    ("studies", "diagnosis"),
    ("labelling",),
    ("reproduce",),
    ("prereg",),
    ("bench",),
    ("cli",),
    ("__main__",),  # `python -m supersede_lib`: runs `cli`
)
