"""Optimise the memory-writing instruction with GEPA, through the project's runner.

`adapter` (the `gepa` adapter: a candidate instruction run on episodes by `eval.runner`, the
pre-registered score and feedback), `reflection` (any project `ChatModel` as GEPA's reflection model,
unusable replies counted and skipped), `optimise` (`optimise_instruction`: `gepa.optimize` with the
pre-registered split and budget, resumable after a kill) and `report` (the chosen instruction against
the one it started from on held-out episodes: accuracy, Wilson intervals, exact McNemar, cost).
`python -m supersede_lib optimise-instruction` runs it for any served model; docs/instruction.md.
"""

from supersede_lib.instruction.adapter import NOTES_COMPONENT, NotesInstructionAdapter, seed_instruction
from supersede_lib.instruction.optimise import Optimisation, optimise_instruction, selection_split
from supersede_lib.instruction.reflection import MAX_INSTRUCTION_CHARS, CheckedReflection, ReflectionTally

__all__ = [
    "MAX_INSTRUCTION_CHARS",
    "NOTES_COMPONENT",
    "CheckedReflection",
    "NotesInstructionAdapter",
    "Optimisation",
    "ReflectionTally",
    "optimise_instruction",
    "seed_instruction",
    "selection_split",
]
