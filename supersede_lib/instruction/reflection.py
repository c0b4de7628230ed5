"""The reflection model: any project `ChatModel`, called by GEPA's own reflective proposer.

`ReflectionModel` is the plain `prompt -> text` callable GEPA's `LanguageModel` protocol asks for, over
a `ChatModel` (wrap it in `models.cache.CachedChatModel` and every reflection call is cached and
replayed like a task-model call; greedy, seed 0). `CheckedReflection` is GEPA's default reflector
(`StatelessReflectionLM`: the package's prompt template and its parser of the reply) with the faults of
the pre-registration handled: a reply that proposes no instruction (no ``` block, or an empty one), one
over `max_chars`, or a call that failed for good is counted in `ReflectionTally` and dropped, so GEPA
skips that proposal and goes on. A setting wrong for every call (`ModelConfigError`) is kept and stops
the run at the next iteration (`StopOnConfigError`), with GEPA's state saved for a resume.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gepa.proposer.reflective_mutation.reflection_lm import (
    ReflectionJob,
    ReflectionProposal,
    StatelessReflectionLM,
)

from supersede_lib.eval.scheduling import run_sync
from supersede_lib.models.chat import ChatModel, ModelCallError, ModelConfigError

MAX_INSTRUCTION_CHARS = 2_000  # the pre-registered prompt budget of one proposed instruction
REFLECTION_MAX_TOKENS = 1_024  # room for a 2,000-character instruction and the words around it
FENCE = "```"


@dataclass
class ReflectionTally:
    """Reflection calls and what came of them; restored on resume with GEPA's state."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    proposals: int = 0  # replies whose instruction GEPA went on to evaluate
    no_instruction: int = 0  # replies without a ``` block, or with an empty one: skipped
    too_long: int = 0  # instructions over MAX_INSTRUCTION_CHARS: skipped
    failed_calls: int = 0  # calls that failed for good (retries used up): skipped

    @property
    def skipped(self) -> int:
        return self.no_instruction + self.too_long + self.failed_calls

    def as_dict(self) -> dict[str, int]:
        return asdict(self) | {"skipped": self.skipped}


class ReflectionModel:
    """GEPA's `LanguageModel` (`prompt -> reply text`) over a project `ChatModel`, greedy and seeded."""

    def __init__(self, model: ChatModel, tally: ReflectionTally, max_tokens: int = REFLECTION_MAX_TOKENS):
        self.model = model
        self.tally = tally
        self.max_tokens = max_tokens

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        result = run_sync(self.model.achat(messages, max_tokens=self.max_tokens, temperature=0.0, seed=0))
        self.tally.calls += 1
        self.tally.cached_calls += int(result.cached)
        self.tally.prompt_tokens += result.prompt_tokens
        self.tally.completion_tokens += result.completion_tokens
        return result.text


def rejection(reply: str, instruction: str, max_chars: int = MAX_INSTRUCTION_CHARS) -> str | None:
    """Why a reflection reply is skipped ("no_instruction", "too_long"), or None when its instruction
    (as GEPA's parser read it) is usable: GEPA's template asks for the instruction in ``` blocks."""
    if FENCE not in reply or not instruction.strip():
        return "no_instruction"
    if len(instruction) > max_chars:
        return "too_long"
    return None


class CheckedReflection(StatelessReflectionLM):
    """GEPA's default reflector whose unusable proposals are counted and dropped (see the module)."""

    def __init__(self, lm: ReflectionModel, logger: Any = None, max_chars: int = MAX_INSTRUCTION_CHARS):
        super().__init__(lm, None, logger)
        self.tally = lm.tally
        self.max_chars = max_chars
        self.config_error: ModelConfigError | None = None

    def reflect_many(self, jobs: list[ReflectionJob]) -> list[tuple[ReflectionProposal, CheckedReflection]]:
        try:
            results = super().reflect_many(jobs)
        except ModelConfigError as error:  # wrong for every call: stop the run (its state is saved)
            self.config_error = error
            return [(ReflectionProposal(new_texts={}), self) for _ in jobs]
        except ModelCallError as error:
            self.tally.failed_calls += sum(len(components) for _, _, components in jobs)
            self._log(f"reflection call failed, proposal skipped: {error}")
            return [(ReflectionProposal(new_texts={}), self) for _ in jobs]
        for proposal, _ in results:
            self._drop_unusable(proposal)
        return [(proposal, self) for proposal, _ in results]

    def _drop_unusable(self, proposal: ReflectionProposal) -> None:
        for name in list(proposal.new_texts):
            why = rejection(proposal.raw_lm_outputs.get(name, ""), proposal.new_texts[name], self.max_chars)
            if why is None:
                self.tally.proposals += 1
                continue
            setattr(self.tally, why, getattr(self.tally, why) + 1)
            self._log(f"reflection reply for {name} skipped ({why})")
            del proposal.new_texts[name]


class StopOnConfigError:
    """A GEPA stopper: True once the reflector met a setting wrong for every call."""

    def __init__(self, reflector: CheckedReflection) -> None:
        self.reflector = reflector

    def __call__(self, gepa_state: Any) -> bool:
        return self.reflector.config_error is not None
