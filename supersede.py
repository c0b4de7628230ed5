"""The `supersede` verifiers environment module: `vf.load_environment("supersede", ...)`, `vf-eval supersede`.

verifiers imports an environment by its module name, so this top-level module only re-exports the
entry point; the environment itself lives in `supersede_lib.environment`.
"""

from supersede_lib.environment import load_environment

__all__ = ["load_environment"]
