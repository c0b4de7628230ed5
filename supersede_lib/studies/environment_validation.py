"""Notebook 05 (paper §4, §5.2): the verifiers environment end to end, and the synthetic saturation check.

`run_environment_validation(profile)` = `run_environment_conditions` (the runner's bounded-memory run,
then `SupersedeEnv.evaluate` on the same questions with the model behind a local endpoint that
replays the runner's cached replies, then full context on explicit templated timelines) →
`analyse_environment` (termination, the environment's reward beside the reference accuracy, answers
identical to the runner's, saturation) → `write_environment`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Episode
from supersede_lib.agent.settings import DEFAULT_MAX_TOKENS_ANSWER
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.run_files import default_run_name
from supersede_lib.eval.runner import (
    RunSettings,
    notes_max_tokens_for,
    run_condition,
    run_sync,
)
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.profiles import EnvironmentBlock, Profile, SaturationBlock, judge_for
from supersede_lib.results import paper_results
from supersede_lib.results.comparison import (
    correct_column,
    failed_ids,
    failed_mask,
    grader_name,
    incomplete_line,
)
from supersede_lib.results.headings import (
    MATCHER,
    NOTEBOOK_ENVIRONMENT,
    headline_number,
    ours_label,
    paper_label,
    percent,
)
from supersede_lib.results.outputs import ResultOfRuns, record_summary, study_progress, write_table


@dataclass
class ServedModelStats:
    """How many requests the endpoint answered, how many from the cache, and of which kind."""

    requests: int = 0
    cached: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class ModelEndpoint:
    """Serve a `ChatModel` on a local OpenAI-compatible URL so the verifiers environment can call it.

    Each request is answered by the same `ChatModel` object (and response cache) the runner
    uses, with the runner's per-turn token limits: a notes rewrite gets the notes limit for the
    budget, an answer the answer limit. A prompt identical to one the runner sent is therefore
    replayed from the cache, and `stats.cached` counts how many were.
    """

    def __init__(self, model: Any, *, notes_budget_chars: int, seed: int = 0) -> None:
        self.model = model
        self.seed = seed
        self.notes_max_tokens = notes_max_tokens_for(notes_budget_chars)
        self.answer_max_tokens = DEFAULT_MAX_TOKENS_ANSWER
        self.stats = ServedModelStats()
        self._stats_lock = threading.Lock()  # the server answers each connection on its own thread
        self.server = LocalOpenAIServer(responder=self._respond, model=model.name)

    def _respond(self, messages: list[dict[str, Any]]) -> str:
        plain = [
            {"role": str(message["role"]), "content": str(message.get("content") or "")}
            for message in messages
        ]
        is_notes = prompts.is_notes_request(plain)
        kind = "notes" if is_notes else "answer"
        max_tokens = self.notes_max_tokens if is_notes else self.answer_max_tokens
        result = run_sync(self.model.achat(plain, max_tokens=max_tokens, temperature=0.0, seed=self.seed))
        with self._stats_lock:
            self.stats.requests += 1
            self.stats.cached += int(bool(result.cached))
            self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
        return result.text

    def __enter__(self) -> ModelEndpoint:
        self.server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.stop()

    @property
    def base_url(self) -> str:
        return self.server.base_url


@dataclass
class EnvironmentRuns:
    """What notebook 05 ran: the runner's rows, the environment's rollouts, the saturation rows."""

    profile: Profile
    model: str
    runner: pd.DataFrame  # run_condition, bounded memory, one row per question
    rollouts: pd.DataFrame  # one row per environment rollout
    served: ServedModelStats
    saturation: pd.DataFrame  # run_condition, full context on explicit templated timelines
    judged: bool  # whether the runner's rows carry the profile judge's verdicts
    grader: str  # who graded the runner's rows


@dataclass
class EnvironmentValidationResult(ResultOfRuns):
    """Notebook 05: the verifiers environment end to end, and the synthetic saturation check."""

    raw: EnvironmentRuns
    n: int
    runner_comparison: pd.DataFrame  # each rollout beside the runner's answer to the same question
    terminated: int
    all_terminated: bool
    environment_accuracy: float  # mean answered_current (the intrinsic matcher reward r_cur)
    environment_mean_reward: float  # r_cur + lambda * r_stale
    reference_accuracy: float
    reference_grader: str
    answers_identical: int  # environment answer == runner answer, per question
    saturation_accuracy: float
    table: pd.DataFrame
    saturation_table: pd.DataFrame
    # questions the runner failed on or the environment could not finish (its `error`): neither right
    # nor wrong, in no accuracy or agreement above; and the saturation run's failed questions
    left_out: list[str] = field(default_factory=list)
    saturation_failed: int = 0

    @property
    def data_label(self) -> str:
        return self.profile.require("environment").episodes.label

    @property
    def rollouts(self) -> pd.DataFrame:
        """One row per environment rollout."""
        return self.raw.rollouts

    @property
    def served(self) -> ServedModelStats:
        return self.raw.served

    @property
    def saturation(self) -> pd.DataFrame:
        """Full context on explicit templated timelines, one row per question."""
        return self.raw.saturation


def _final_answer(output: dict[str, Any]) -> str:
    turns = output.get("supersede_turns") or []
    if turns:
        return str(turns[-1].get("reply") or "").strip() if turns[-1].get("kind") == "answer" else ""
    return ""


def _info(output: dict[str, Any]) -> dict[str, Any]:
    info = output.get("info") or {}
    return json.loads(info) if isinstance(info, str) else dict(info)


def _no_progress(*_args: Any) -> None:
    """A verifiers progress callback that replaces its tqdm bar with nothing."""


def evaluate_environment(
    episodes: Sequence[Episode],
    model: Any,
    settings: RunSettings,
    *,
    progress: bool = True,
) -> tuple[pd.DataFrame, ServedModelStats]:
    """Run `SupersedeEnv.evaluate` over `episodes` with `model` behind a local endpoint under the
    runner's `settings` (budget, prompt variant, concurrency, seed); one row per rollout."""
    import verifiers as vf

    from supersede_lib.environment import make_environment

    env = make_environment(list(episodes), settings=settings)
    budget = settings.notes_budget_chars
    with ModelEndpoint(model, notes_budget_chars=budget, seed=settings.seed) as endpoint:
        client = vf.ClientConfig(api_key_var="SUPERSEDE_LOCAL_ENDPOINT_KEY", api_base_url=endpoint.base_url)
        results = run_sync(
            env.evaluate(
                client=client,
                model=model.name,
                sampling_args={"temperature": 0.0},
                max_concurrent=settings.concurrency,
                state_columns=["supersede_turns"],
                on_progress=None if progress else _no_progress,
            )
        )
    rows = []
    for output in results["outputs"]:
        info = _info(output)
        episode = info.get("episode", {})
        metrics = output.get("metrics") or {}
        error = output.get("error")
        turns = output.get("supersede_turns") or []
        rows.append(
            {
                "example_id": output.get("example_id"),
                "episode_id": episode.get("episode_id"),
                "n_sessions": len(episode.get("sessions", [])),
                "turns": len(turns),
                "is_completed": bool(output.get("is_completed")),
                "stop_condition": output.get("stop_condition"),
                "error": None if not error else json.dumps(error, default=str)[:300],
                "answer": _final_answer(output),
                "answered_current": float(metrics.get("answered_current", 0.0)),
                "stale_penalty": float(metrics.get("stale_penalty", 0.0)),
                "notes_truncations": float(metrics.get("notes_truncations", 0.0)),
                "reward": float(output.get("reward") or 0.0),
            }
        )
    frame = pd.DataFrame(rows)
    frame["terminated"] = (
        frame["is_completed"]
        & frame["error"].isna()
        & (frame["turns"] == frame["n_sessions"] + 1)
        & (frame["stop_condition"] == "rollout_done")
    )
    return frame, endpoint.stats


def run_environment_conditions(profile: Profile, *, progress: bool = True) -> EnvironmentRuns:
    """The runner, then the environment on the same questions, then full context on saturation episodes.

    The runner goes first: the environment's requests then replay from the cache exactly when the
    environment sends the prompts the runner sent.
    """
    block: EnvironmentBlock = profile.require("environment")
    saturation_block: SaturationBlock = profile.require("saturation")
    directory = profiles.output_dir(profile, NOTEBOOK_ENVIRONMENT)
    model = profiles.model_for(profile.model, profile)
    judge = judge_for(profile)
    settings = profile.run_settings(notes_budget_chars=block.notes_budget_chars)
    budget = settings.notes_budget_chars
    episodes = load_episodes(block.episodes)
    saturation_episodes = load_episodes(saturation_block.episodes)
    # the study's bar counts the runner's two runs; the environment keeps verifiers' own bar
    total = len(episodes) + len(saturation_episodes)
    with study_progress(profile, NOTEBOOK_ENVIRONMENT, total, progress) as bar:
        runner = run_condition(
            episodes,
            "bounded_memory",
            model,
            settings,
            judge=judge,
            output_dir=directory,
            run_name=default_run_name("bounded_memory", model.name, budget, None),
            progress=bar,
        ).frame
        rollouts, served = evaluate_environment(episodes, model, settings, progress=progress)
        saturation = run_condition(
            saturation_episodes,
            "full_context",
            model,
            profile.run_settings(),
            output_dir=directory,
            run_name=default_run_name("saturation_full_context", model.name, None, None),
            progress=bar,
        ).frame
    return EnvironmentRuns(
        profile=profile,
        model=model.name,
        runner=runner,
        rollouts=rollouts,
        served=served,
        saturation=saturation,
        judged=judge is not None,
        grader=grader_name(judge),
    )


def environment_table(
    result: EnvironmentValidationResult, ours_header: str, paper_header: str
) -> pd.DataFrame:
    """The paper's environment-validation facts beside ours (one column each)."""
    n, served, failed = result.n, result.served, len(result.left_out)
    left_out = f" ({failed} of {n} failed, left out)" if failed else ""
    return pd.DataFrame(
        [
            (
                "rollouts terminated with an answer",
                f"{paper_results.TABLE1_N}/{paper_results.TABLE1_N}",
                f"{result.terminated}/{n}",
            ),
            (
                "environment reward accuracy (r_cur, matcher)",
                percent(paper_results.ENVIRONMENT_MATCHER_ACCURACY),
                percent(result.environment_accuracy) + left_out,
            ),
            (
                "reference accuracy",
                f"{percent(paper_results.ENVIRONMENT_JUDGE_ACCURACY)} (LLM judge)",
                f"{percent(result.reference_accuracy)} ({result.reference_grader})" + left_out,
            ),
            ("mean reward r_cur + λ·r_stale", "—", f"{result.environment_mean_reward:.3f}" + left_out),
            (
                "answers identical to run_condition's",
                "—",
                f"{result.answers_identical}/{n - failed}" + left_out,
            ),
            (
                "environment requests replayed from the runner's cache",
                "—",
                f"{served.cached}/{served.requests}",
            ),
        ],
        columns=["measure", paper_header, ours_header],
    )


def analyse_environment(raw: EnvironmentRuns) -> EnvironmentValidationResult:
    """Termination, the environment's reward beside the reference accuracy, answer agreement, saturation."""
    profile, rollouts, runner = raw.profile, raw.rollouts, raw.runner
    reference_grader = raw.grader if raw.judged else f"run_condition, {MATCHER}"
    # a question either driver failed on is neither right nor wrong: it leaves both accuracies
    left_out = failed_ids(runner) | {
        str(key) for key in rollouts.loc[rollouts["error"].notna(), "episode_id"]
    }
    compared = rollouts[~rollouts["episode_id"].astype(str).isin(left_out)]
    runner_compared = runner[~runner["episode_id"].astype(str).isin(left_out)]
    saturation = raw.saturation[~failed_mask(raw.saturation)]
    joined = rollouts.merge(
        runner[["episode_id", "answer", "answered_current"]].rename(
            columns={"answer": "runner_answer", "answered_current": "runner_answered_current"}
        ),
        on="episode_id",
        how="left",
    )
    n = len(rollouts)
    terminated = int(rollouts["terminated"].sum())  # every rollout: not terminating is the finding here
    joined_compared = joined[~joined["episode_id"].astype(str).isin(left_out)]
    saturation_label = profile.require("saturation").episodes.label
    result = EnvironmentValidationResult(
        raw=raw,
        n=n,
        runner_comparison=joined,
        terminated=terminated,
        all_terminated=terminated == n,
        environment_accuracy=float(compared["answered_current"].mean()),
        environment_mean_reward=float(compared["reward"].mean()),
        reference_accuracy=float(correct_column(runner_compared, use_judge=raw.judged).mean()),
        reference_grader=reference_grader,
        answers_identical=int(
            (
                joined_compared["answer"].fillna("")
                == joined_compared["runner_answer"].fillna("").str.strip()
            ).sum()
        ),
        saturation_accuracy=float(correct_column(saturation, use_judge=False).mean()),
        table=pd.DataFrame(),
        saturation_table=pd.DataFrame(),
        left_out=sorted(left_out),
        saturation_failed=len(raw.saturation) - len(saturation),
    )
    result.table = environment_table(
        result,
        ours_label(raw.model, result.data_label, profile.name, n),
        paper_label("gpt-4.1-mini", paper_results.TABLE1_N),
    )
    result.saturation_table = pd.DataFrame(
        [
            (
                "full-context accuracy on explicit templated timelines",
                f"{percent(paper_results.SYNTHETIC_FULL_CONTEXT_ACCURACY)} (gpt-4.1 family and gpt-5.4)",
                percent(result.saturation_accuracy)
                + (
                    f" ({result.saturation_failed} of {len(raw.saturation)} failed, left out)"
                    if result.saturation_failed
                    else ""
                ),
            )
        ],
        columns=[
            "measure",
            "paper (frontier models, templated synthetic)",
            ours_label(raw.model, saturation_label, profile.name, len(raw.saturation)),
        ],
    )
    return result


def _environment_numbers(result: EnvironmentValidationResult) -> list[dict]:
    profile = result.profile
    meta = {"model": result.model, "data": result.data_label, "profile": profile.name, "n": result.n}
    return [
        headline_number("rollouts terminated", result.terminated, **meta),
        headline_number("environment accuracy (r_cur)", result.environment_accuracy, grader=MATCHER, **meta),
        headline_number("environment mean reward", result.environment_mean_reward, grader=MATCHER, **meta),
        headline_number(
            "reference accuracy", result.reference_accuracy, grader=result.reference_grader, **meta
        ),
        headline_number("answers identical to runner", result.answers_identical, **meta),
        headline_number("served requests", result.served.requests, **meta),
        headline_number("served requests from cache", result.served.cached, **meta),
        headline_number(
            "saturation full_context accuracy",
            result.saturation_accuracy,
            model=result.model,
            data=profile.require("saturation").episodes.label,
            profile=profile.name,
            n=len(result.saturation),
            grader=MATCHER,
        ),
    ]


def write_environment(
    result: EnvironmentValidationResult, directory: Path | None = None
) -> EnvironmentValidationResult:
    """Write 05's rollouts, the runner comparison, both tables and summary.json; returns `result`."""
    profile = result.profile
    directory = directory or profiles.output_dir(profile, NOTEBOOK_ENVIRONMENT)
    result.rollouts.to_csv(directory / "environment_rollouts.csv", index=False)
    result.runner_comparison.to_csv(directory / "environment_vs_runner.csv", index=False)
    tables = [
        write_table(
            directory,
            "environment_validation",
            result.table,
            first_line=incomplete_line(len(result.left_out), result.n),
        ),
        write_table(
            directory,
            "saturation",
            result.saturation_table,
            f"Graded by the {MATCHER}. The paper (§4) reports 100% for frontier models reading these "
            "explicit timelines in full context, which is why it calls templated supersession saturated.",
            first_line=incomplete_line(result.saturation_failed, len(result.saturation)),
        ),
    ]
    numbers = _environment_numbers(result)
    config = profile.as_config("environment", "saturation", "model", "judge")
    extra = {"all_terminated": result.all_terminated, "served": asdict(result.served)}
    if result.left_out:
        extra["left_out"] = result.left_out  # failed questions: in no accuracy above
    return record_summary(result, directory, NOTEBOOK_ENVIRONMENT, numbers, tables, config, extra)


def run_environment_validation(profile: Profile, *, progress: bool = True) -> EnvironmentValidationResult:
    """Paper §5.2 'environment validation' and §4's saturation check, on the profile's model.

    1. `SupersedeEnv.evaluate` on every question of `environment.episodes`: every rollout must
       terminate with an answer; its intrinsic matcher reward is compared with the judge's accuracy
       (when the profile has a judge) or else with `run_condition`'s matcher accuracy on the same
       questions, and the two drivers' answers are compared question by question.
    2. Full context on explicit templated synthetic timelines (`saturation.episodes`): a capable
       model should be near 100%.
    """
    return write_environment(analyse_environment(run_environment_conditions(profile, progress=progress)))
