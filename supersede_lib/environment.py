"""The Supersede environment for verifiers 0.3.1, driven by the same rollout core as evaluation and training.

A stock `vf.MultiTurnEnv` keeps appending to one growing conversation, which would re-feed every
earlier session. `SupersedeEnv` instead keeps a `BoundedMemoryRollout` (or `FullContextRollout`)
in `state` and builds every turn's prompt from `rollout.current_messages()`: the model sees only
its notes and the next session, then its notes and the question. Each reply is fed back through
`env_response` to `rollout.step`, and the rollout ends when the core says it is done.

Use it through the standard entry points (`vf.load_environment("supersede", ...)`, `vf-eval
supersede ...`) or build one from hand-made episodes with `make_environment`. Like every verifiers
environment, building one installs SIGINT/SIGTERM handlers and an atexit hook (main thread only),
and a blank model reply raises `EmptyModelResponseError`, which ends that rollout with reward 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import verifiers as vf

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.rollout import Rollout, make_rollout
from supersede_lib.agent.settings import DEFAULT_ROLLOUT, RolloutSettings
from supersede_lib.data.longmemeval import DataUnavailableError, load_longmemeval
from supersede_lib.data.synthetic import generate_episodes
from supersede_lib.eval.matcher import score_episode_answer

if TYPE_CHECKING:
    from datasets import Dataset

ROLLOUT_KEY = "supersede_rollout"  # the live rollout state machine (not serialisable)
TURNS_KEY = "supersede_turns"  # JSON-able TurnRecords: the exact prompt and reply of every turn
SCORE_KEY = "supersede_score"  # verdict of the final answer, computed once per rollout
MODES = ("eval", "train")


def episodes_to_dataset(
    episodes: Sequence[Episode],
    *,
    full_context: bool = False,
    settings: RolloutSettings = DEFAULT_ROLLOUT,
    **changes: Any,
) -> Dataset:
    """One verifiers row per episode: `prompt`, `question`, `answer` and a JSON `info`.

    `prompt` is the exact first-turn prompt of the rollout core and `question` its last user
    message. `info` carries the whole episode plus the condition, the resolved notes budget and the
    prompt variant (`settings` with `changes` to its fields on top), so each rollout can rebuild its
    state machine; it is a JSON string because episodes differ in
    shape (verifiers decodes it into a dict before `setup_state`).
    """
    from datasets import Dataset

    condition = "full_context" if full_context else "bounded_memory"
    settings = settings.with_changes(**changes)
    rows = []
    for index, episode in enumerate(episodes):
        if not isinstance(episode, Episode):
            raise TypeError(f"episodes[{index}] is a {type(episode).__name__}, expected an Episode")
        if not episode.sessions:
            raise ValueError(f"episode {episode.episode_id!r}: field 'sessions' is empty")
        if not episode.gold_answers and not episode.is_abstention:
            raise ValueError(f"episode {episode.episode_id!r}: field 'gold_answers' is empty")
        rollout = make_rollout(episode, condition, settings=settings)
        budget = None if full_context else rollout.notes_budget_chars
        first_prompt = rollout.current_messages()
        info = {
            "episode": episode.to_dict(),
            "condition": condition,
            "notes_budget_chars": budget,
            "prompt_variant": settings.prompt_variant,
        }
        try:
            info_json = json.dumps(info)
        except TypeError as error:
            raise ValueError(
                f"episode {episode.episode_id!r}: field 'metadata' is not JSON-able: {error}"
            ) from error
        rows.append(
            {
                "prompt": first_prompt,
                "question": first_prompt[-1]["content"],
                "answer": episode.gold_text or next(iter(episode.gold_answers), ""),
                "info": info_json,
            }
        )
    if not rows:
        raise ValueError("no episodes to build a dataset from")
    return Dataset.from_list(rows)


def rollout_from_info(info: Mapping[str, Any], example_id: object = None) -> Rollout:
    """Rebuild the rollout state machine from a row's `info` (see `episodes_to_dataset`)."""
    for field_name in ("episode", "condition"):
        if field_name not in info:
            raise ValueError(f"example {example_id}: info has no {field_name!r} field")
    episode = Episode.from_dict(info["episode"])
    return make_rollout(
        episode,
        info["condition"],
        notes_budget_chars=info.get("notes_budget_chars"),
        prompt_variant=info.get("prompt_variant", DEFAULT_ROLLOUT.prompt_variant),
    )


def _message_text(message: Any) -> str:
    """Plain text of a chat message whose content may be a string, parts, or None."""
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        text = part.get("text") if isinstance(part, Mapping) else getattr(part, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


def _to_vf_messages(messages: Sequence[Mapping[str, str]]) -> vf.Messages:
    """The rollout core's plain dicts as verifiers message objects (avoids re-validation warnings).

    verifiers 0.3.1 sends every assistant message with `reasoning_content`, null unless set, and
    llama.cpp's server (also behind Ollama) rejects a null there ("type must be string"). The notes
    prompt's worked example is an assistant turn, so it carries an empty string instead.
    """
    converted: vf.Messages = []
    for message in messages:
        if message["role"] == "assistant":
            converted.append(vf.AssistantMessage(content=message["content"], reasoning_content=""))
        else:
            kind = {"system": vf.SystemMessage, "user": vf.UserMessage}[message["role"]]
            converted.append(kind(content=message["content"]))
    return converted


class SupersedeEnv(vf.MultiTurnEnv):
    """Multi-turn env whose prompts come from the rollout core instead of a growing chat."""

    async def setup_state(self, state: vf.State) -> vf.State:
        state[ROLLOUT_KEY] = rollout_from_info(state["info"], state.get("example_id"))
        state[TURNS_KEY] = []
        return state

    async def get_prompt_messages(self, state: vf.State) -> vf.Messages:
        """Feed the last reply through `env_response`, then return the core's next prompt."""
        rollout: Rollout = state[ROLLOUT_KEY]
        if state["trajectory"]:
            last_step = state["trajectory"][-1]
            await self.env_response([*last_step["prompt"], *last_step["completion"]], state)
            if rollout.done:
                return []  # final_env_response is set: the loop stops without another model call
        return _to_vf_messages(rollout.current_messages())

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        """Step the rollout with the model's reply; answer with the new user message of the next turn.

        The returned message is what the next prompt adds (notes + next session, or notes + the
        question); `get_prompt_messages` sends it inside a freshly built prompt, never appended to
        the earlier turns.
        """
        rollout: Rollout = state[ROLLOUT_KEY]
        rollout.step(_message_text(messages[-1]) if messages else "")
        state[TURNS_KEY] = [asdict(turn) for turn in rollout.turns]
        if rollout.done:
            state["final_env_response"] = []
            return []
        return [vf.UserMessage(content=rollout.current_messages()[-1]["content"])]

    @vf.stop(priority=50)
    async def rollout_done(self, state: vf.State) -> bool:
        """The rollout core has its answer."""
        rollout = state.get(ROLLOUT_KEY)
        return rollout is not None and rollout.done

    async def render_completion(self, state: vf.State) -> None:
        """A readable transcript: each reply, and the new user message of every later turn.

        The exact prompt of turn k is `state["trajectory"][k]["prompt"]` (also saved as the
        `supersede_turns` state column); this transcript is not what any single turn saw.
        """
        completion: vf.Messages = []
        for index, step in enumerate(state["trajectory"]):
            if index > 0:
                completion.append(step["prompt"][-1])
            completion.extend(step["completion"])
        state["completion"] = completion


def _score(state: vf.State) -> dict[str, Any]:
    """Score the rollout's final answer once; an unfinished rollout (error, empty reply) scores nothing."""
    if SCORE_KEY in state:
        return state[SCORE_KEY]
    rollout = state.get(ROLLOUT_KEY)
    if rollout is None or rollout.answer is None:
        result = {"verdict": "no_answer", "answered_current": False, "asserted_stale": False, "reason": ""}
    else:
        score = score_episode_answer(rollout.episode, rollout.answer)
        result = {
            "verdict": score.verdict,
            "answered_current": bool(score.answered_current),
            "asserted_stale": bool(score.asserted_stale),
            "reason": score.reason,
        }
    state[SCORE_KEY] = result
    return result


def answered_current(state: vf.State) -> float:
    """r_cur: 1 when the final answer conveys the current value (or correctly abstains)."""
    return 1.0 if _score(state)["answered_current"] else 0.0


def stale_penalty(state: vf.State) -> float:
    """r_stale: -1 when the final answer asserts a superseded value; weighted by lambda."""
    return -1.0 if _score(state)["asserted_stale"] else 0.0


def notes_truncations(state: vf.State) -> float:
    """How many notes rewrites the budget cut (a metric, weight 0)."""
    rollout = state.get(ROLLOUT_KEY)
    return float(rollout.truncation_count) if rollout is not None else 0.0


def make_rubric(stale_penalty_weight: float = 1.0) -> vf.Rubric:
    """reward = answered_current + lambda * stale_penalty, both reported as metrics."""
    if stale_penalty_weight < 0:
        raise ValueError(f"stale_penalty_weight must be >= 0, got {stale_penalty_weight}")
    rubric = vf.Rubric(funcs=[answered_current, stale_penalty], weights=[1.0, stale_penalty_weight])
    rubric.add_metric(notes_truncations)
    return rubric


def make_environment(
    episodes: Sequence[Episode],
    *,
    full_context: bool = False,
    settings: RolloutSettings = DEFAULT_ROLLOUT,
    stale_penalty_weight: float = 1.0,
    as_train_dataset: bool = False,
    **env_kwargs: Any,
) -> SupersedeEnv:
    """A `SupersedeEnv` over given episodes (as its eval dataset, or train dataset when asked), each
    rollout run under `settings`."""
    dataset = episodes_to_dataset(episodes, full_context=full_context, settings=settings)
    dataset_kwargs = {"dataset": dataset} if as_train_dataset else {"eval_dataset": dataset}
    return SupersedeEnv(rubric=make_rubric(stale_penalty_weight), **dataset_kwargs, **env_kwargs)


VF_EVAL_DATA_ADVICE = (
    'For vf-eval: point it at a local copy, -a \'{"data_path": "/path/to/longmemeval"}\' (or set '
    'SUPERSEDE_LONGMEMEVAL_DIR), or evaluate on generated episodes with no download: -a \'{"mode": "train"}\'.'
)


def _eval_episodes(split: str, question_type: str, data_path: str | None, max_examples: int) -> list:
    """LongMemEval for mode "eval"; offline, the error says what a vf-eval user can pass instead."""
    limit = max_examples if max_examples > 0 else None
    try:
        return load_longmemeval(split=split, question_type=question_type, local_path=data_path, limit=limit)
    except DataUnavailableError as error:
        # what failed, without the advice that follows it (meant for `make` users)
        what = re.split(r"\.\s+(?=Set |Put the )", str(error), maxsplit=1)[0].rstrip(".")
        raise DataUnavailableError(f"{what}. {VF_EVAL_DATA_ADVICE}") from error


def load_environment(
    question_type: str = "knowledge-update",
    split: str = "oracle",
    max_examples: int = -1,
    notes_budget_chars: int = DEFAULT_ROLLOUT.notes_budget_chars,
    chars_per_session: int | None = None,
    full_context: bool = False,
    mode: str = "eval",
    difficulty: str = "medium",
    stale_penalty_weight: float = 1.0,
    seed: int = 0,
    num_train_examples: int = 256,
    data_path: str | None = None,
    prompt_variant: str = DEFAULT_ROLLOUT.prompt_variant,
    **kwargs: Any,
) -> SupersedeEnv:
    """The verifiers entry point (`vf.load_environment("supersede", **args)`, `vf-eval supersede`).

    mode "eval": LongMemEval questions of `question_type` from `split` (a local copy at `data_path`
    or `SUPERSEDE_LONGMEMEVAL_DIR`, else the hub); mode "train": `num_train_examples` procedural
    episodes of `difficulty` generated from `seed`. `max_examples` > 0 keeps the first that many.
    Remaining keyword arguments go to the environment (e.g. `timeout_seconds`, `sampling_args`).
    """
    if mode == "eval":
        episodes = _eval_episodes(split, question_type, data_path, max_examples)
    elif mode == "train":
        episodes = generate_episodes(num_train_examples, seed=seed, difficulty=difficulty)
    else:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if max_examples > 0:
        episodes = episodes[:max_examples]
    return make_environment(
        episodes,
        full_context=full_context,
        settings=RolloutSettings(
            notes_budget_chars=notes_budget_chars,
            chars_per_session=chars_per_session,
            prompt_variant=prompt_variant,
        ),
        stale_penalty_weight=stale_penalty_weight,
        as_train_dataset=mode == "train",
        **kwargs,
    )
