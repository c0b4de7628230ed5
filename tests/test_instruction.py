"""GEPA optimising the memory instruction through the runner, against the fake OpenAI-compatible server.

The fake task model writes better notes when the notes call's system text says KEEP (it keeps the
notes unless a session states an update, and otherwise keeps only the last thing the user said), so an optimisation has something to find; the fake
reflection model answers GEPA's prompt with the current instruction plus a KEEP sentence, in ```
blocks, or with the bad replies a test scripts first.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.prompts import get_prompt_variant, notes_update_messages
from supersede_lib.agent.settings import RolloutSettings
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.instruction import (
    NOTES_COMPONENT,
    CheckedReflection,
    NotesInstructionAdapter,
    ReflectionTally,
    optimise_instruction,
    seed_instruction,
)
from supersede_lib.instruction import adapter as adapter_module
from supersede_lib.instruction.reflection import ReflectionModel, rejection
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.chat import ModelConfigError
from supersede_lib.models.local_server import LocalOpenAIServer, ScriptedFailure, default_responder
from supersede_lib.models.openai_api import OpenAIChatModel

UPDATE = re.compile(r"\b(changed|switched|now|moved|new|anymore|instead|no longer)\b", re.IGNORECASE)
REFLECTION_MARK = "Your task is to write a new instruction"
KEEP = "KEEP the notes; replace a value only when the user states an update."
SETTINGS = RunSettings(concurrency=4)  # the default variant: notes rewritten whole


def task_reply(messages: list[dict[str, Any]]) -> str:
    """The fake task model: its notes keep what they hold until an update under a KEEP instruction,
    and hold only the last user line otherwise (so an update followed by small talk is lost)."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    text = messages[-1]["content"]
    if "New conversation (" not in text:
        return default_responder(messages)
    if "KEEP" not in system:
        return default_responder(messages).split("; ")[-1]
    head, conversation = text.split("New conversation (", 1)
    notes = head.split("characters):\n", 1)[-1].strip()
    lines = [line[5:].strip() for line in conversation.splitlines() if line.startswith("user:")]
    updates = [line for line in lines if UPDATE.search(line)]
    if updates:
        return updates[-1][:300]
    return notes if notes and notes != "(empty)" else (lines[0] if lines else "")


class FakeModels:
    """One server: the task model's replies, and the reflection model's (scripted bad ones first: a
    text, or a `ScriptedFailure` action such as `("status", 500)`)."""

    def __init__(self, bad_replies: list[Any] = (), failing_question: str | None = None) -> None:
        self.bad_replies = list(bad_replies)
        self.failing_question = failing_question
        self.reflection_prompts: list[str] = []

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        text = messages[-1]["content"]
        if REFLECTION_MARK in text:
            self.reflection_prompts.append(text)
            if self.bad_replies:
                bad = self.bad_replies.pop(0)
                if isinstance(bad, tuple):
                    raise ScriptedFailure(bad)
                return bad
            current = text.split("```", 2)[1].strip()
            return f"Here is the new instruction:\n```\n{current}\n{KEEP}\n```"
        if self.failing_question and self.failing_question in text:
            raise ScriptedFailure(("status", 400))
        return task_reply(messages)


def cached_model(server: LocalOpenAIServer, cache_file: Path, name: str = "fake-task") -> CachedChatModel:
    model = OpenAIChatModel(name, base_url=server.base_url, api_key_env="SUPERSEDE_FAKE_KEY", max_retries=0)
    return CachedChatModel(model, ResponseCache(cache_file))


@pytest.fixture(scope="module")
def selection() -> list[Episode]:
    return load_episodes(
        {"source": "synthetic", "n": 10, "difficulty": "easy", "seed": 7301, "n_sessions": [2, 3]}
    )


def test_notes_system_override_reaches_the_notes_call_only(selection: list[Episode]) -> None:
    """The override replaces the notes call's system text; without it nothing changes, and a policy
    without a notes system text refuses it."""
    session = selection[0].sessions[0]
    plain = notes_update_messages("", session, 300)
    assert plain[0]["content"] == get_prompt_variant("v1_worked_example").notes_system
    changed = notes_update_messages("", session, 300, notes_system="Write notes.")
    assert changed[0]["content"] == "Write notes." and changed[1:] == plain[1:]
    with pytest.raises(ValueError, match="notes_system"):
        RolloutSettings(notes_system="x", memory="core_memory")


def test_adapter_scores_feedback_and_isolates_a_failed_episode(
    tmp_path: Path, selection: list[Episode]
) -> None:
    """`evaluate` runs the candidate through the runner (its system text in every notes request, its
    run files written), scores 1 for `correct`, builds the pre-registered feedback, and an episode
    whose call fails for good is a failed row scored 0 and counted, not an exception."""
    batch = selection[:4]
    fakes = FakeModels(failing_question=batch[1].question)
    with LocalOpenAIServer(responder=fakes) as server:
        adapter = NotesInstructionAdapter(
            cached_model(server, tmp_path / "c.sqlite"), SETTINGS, output_dir=tmp_path
        )
        result = adapter.evaluate(batch, {NOTES_COMPONENT: KEEP}, capture_traces=True)
        notes_systems = {
            r["messages"][0]["content"] for r in server.requests if "New conversation (" in str(r)
        }
    assert notes_systems == {KEEP}
    assert result.scores[1] == 0.0 and adapter.tally.failed_episodes == 1
    assert set(result.scores) <= {0.0, 1.0} and len(result.scores) == 4
    assert [o["verdict"] == "correct" for o in result.outputs] == [s == 1.0 for s in result.scores]
    dataset = adapter.make_reflective_dataset({NOTES_COMPONENT: KEEP}, result, [NOTES_COMPONENT])
    first = dataset[NOTES_COMPONENT][0]
    assert first["Inputs"]["Question"] == batch[0].question
    assert (
        batch[0].gold_answers[0] in first["Feedback"] and batch[0].superseded_values[0] in first["Feedback"]
    )
    assert "Matcher verdict" in first["Feedback"] and "Final notes" in first["Generated Outputs"]
    assert "failed (scored 0)" in dataset[NOTES_COMPONENT][1]["Feedback"]
    manifests = list(tmp_path.glob("*manifest*.json"))
    assert manifests and json.loads(manifests[0].read_text())["config"]["notes_system"] == KEEP


def test_a_run_without_override_is_unchanged(tmp_path: Path, selection: list[Episode]) -> None:
    """No override: the variant's own system text and a manifest config without the new key."""
    with LocalOpenAIServer(responder=task_reply) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, api_key_env="SUPERSEDE_FAKE_KEY")
        result = run_condition(selection[:2], "bounded_memory", model, SETTINGS, progress=False)
        systems = {r["messages"][0]["content"] for r in server.requests if "New conversation (" in str(r)}
    assert systems == {get_prompt_variant(SETTINGS.prompt_variant).notes_system}
    assert "notes_system" not in result.manifest["config"]


def _optimise(server: LocalOpenAIServer, folder: Path, episodes: list[Episode], budget: int = 22):
    task = cached_model(server, folder / "cache.sqlite")
    reflection = cached_model(server, folder / "cache.sqlite", name="fake-reflection")
    return optimise_instruction(
        task,
        reflection,
        episodes,
        SETTINGS,
        folder / "run",
        max_metric_calls=budget,
        validation_n=4,
        progress=False,
    )


def test_optimisation_counts_and_skips_bad_reflection_replies(
    tmp_path: Path, selection: list[Episode]
) -> None:
    """A reply with no ``` block and one whose instruction is over 2,000 characters are counted and
    skipped; GEPA goes on, takes the next good proposal and the KEEP instruction wins on validation."""
    too_long = "```\n" + "x" * 2_001 + "\n```"
    fakes = FakeModels(bad_replies=["I would keep the notes short.", too_long])
    with LocalOpenAIServer(responder=fakes) as server:
        result = _optimise(server, tmp_path, selection)
    assert result.reflection["no_instruction"] == 1 and result.reflection["too_long"] == 1
    assert result.reflection["skipped"] == 2 and result.reflection["proposals"] >= 1
    assert KEEP in result.best_instruction and result.best_index > 0
    assert result.validation_scores[result.best_index] > result.validation_scores[0]
    assert result.seed_instruction == get_prompt_variant(SETTINGS.prompt_variant).notes_system
    assert result.metric_calls >= 22 and result.rollouts["failed_episodes"] == 0
    summary = json.loads((tmp_path / "run" / "optimisation.json").read_text())
    assert summary["reflection"]["skipped"] == 2 and summary["best_instruction"] == result.best_instruction


def test_a_failed_reflection_call_is_skipped_and_a_wrong_setting_stops_resumably(
    tmp_path: Path, selection: list[Episode]
) -> None:
    """A reflection call that fails for good (a 500, no retries left) is counted and skipped; one
    refused for every call (401) stops the run with GEPA's state saved, and the same call resumes."""
    with LocalOpenAIServer(responder=FakeModels(bad_replies=[("status", 500)])) as server:
        result = _optimise(server, tmp_path / "failed", selection)
    assert result.reflection["failed_calls"] == 1 and KEEP in result.best_instruction
    with LocalOpenAIServer(responder=FakeModels(bad_replies=[("status", 401)])) as server:
        with pytest.raises(ModelConfigError):
            _optimise(server, tmp_path / "stopped", selection)
        assert (tmp_path / "stopped" / "run" / "gepa_state.bin").exists()
        resumed = _optimise(server, tmp_path / "stopped", selection)
    assert resumed.candidates == result.candidates and resumed.reflection["failed_calls"] == 0


def test_rejection_rules() -> None:
    assert rejection("no fences", "no fences") == "no_instruction"
    assert rejection("```\n\n```", "") == "no_instruction"
    assert rejection("```\nabc\n```", "a" * 2_001) == "too_long"
    assert rejection("```\nabc\n```", "abc") is None


class Killed(Exception):
    """Stands in for a kill: raised by the adapter after a number of evaluations."""


def test_a_killed_optimisation_resumes_to_the_same_result(
    tmp_path: Path, selection: list[Episode], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after 5 evaluations, the run restarts from its last saved state, replays the finished
    calls from the response cache and ends exactly as an uninterrupted run: same candidates, scores,
    chosen instruction and metric calls."""
    budget = 40
    with LocalOpenAIServer(responder=FakeModels()) as server:
        whole = _optimise(server, tmp_path / "whole", selection, budget)
    evaluate = adapter_module.NotesInstructionAdapter.evaluate
    calls = {"n": 0}

    def dying(self, batch, candidate, capture_traces=False):
        calls["n"] += 1
        if calls["n"] > 5:
            raise Killed
        return evaluate(self, batch, candidate, capture_traces)

    with LocalOpenAIServer(responder=FakeModels()) as server:
        monkeypatch.setattr(adapter_module.NotesInstructionAdapter, "evaluate", dying)
        with pytest.raises(Killed):
            _optimise(server, tmp_path / "killed", selection, budget)
        monkeypatch.setattr(adapter_module.NotesInstructionAdapter, "evaluate", evaluate)
        before_resume = server.request_count
        resumed = _optimise(server, tmp_path / "killed", selection, budget)
        resumed_requests = server.request_count - before_resume
    assert len(whole.candidates) > 1
    assert resumed.candidates == whole.candidates and resumed.best_instruction == whole.best_instruction
    assert resumed.validation_scores == whole.validation_scores and resumed.metric_calls == whole.metric_calls
    assert resumed.found_at_metric_calls == whole.found_at_metric_calls
    assert resumed.reflection["calls"] == whole.reflection["calls"]
    assert resumed.rollouts["model_calls"] == whole.rollouts["model_calls"]
    assert resumed.rollouts["cached_calls"] > 0 and resumed_requests < whole.rollouts["model_calls"]


def _cli_args(server: LocalOpenAIServer, out: Path, *extra: str) -> list[str]:
    return [
        "--base-url", server.base_url, "--model", "fake-task", "--reflection-model", "fake-reflection",
        "--api-key-env", "SUPERSEDE_FAKE_KEY", "--prompt-variant", "v1_worked_example", "--budget", "22",
        "--n", "10", "--validation", "4", "--held-out-n", "6", "--out", str(out), *extra,
    ]  # fmt: skip


@pytest.fixture(autouse=True)
def _restore_output_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command points `profiles.OUTPUT_ROOT` at its --out folder for its process; in this test process
    it must not leak into the tests that run after (they read the committed outputs)."""
    from supersede_lib import profiles

    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)


def test_cli_optimises_and_reports_before_and_after(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`optimise-instruction` end to end: GEPA on the selection set, then REPORT.md and report.json
    with both instructions in full, accuracy before and after with Wilson intervals, exact McNemar and
    the cost; a second run of the same command replays everything from the cache."""
    from supersede_lib.cli import main

    with LocalOpenAIServer(responder=FakeModels()) as server:
        assert main(["optimise-instruction", *_cli_args(server, tmp_path)]) == 0
        requests = server.request_count
        assert main(["optimise-instruction", *_cli_args(server, tmp_path)]) == 0
        assert server.request_count == requests  # resumed and replayed: no new call
    folder = tmp_path / "diagnose-fake-task" / "optimise_instruction"
    data = json.loads((folder / "report.json").read_text())
    page = (folder / "REPORT.md").read_text()
    assert KEEP in data["instructions"]["optimised"] and data["instructions"]["original"] in page
    before, after = data["arms"]["original"], data["arms"]["optimised"]
    assert before["n"] == after["n"] == 6 and after["accuracy"] > before["accuracy"]
    assert 0 <= data["mcnemar"]["p_exact"] <= 1 and "Wilson" in page and "McNemar" in page
    assert data["optimisation"]["metric_calls"] >= 22 and "seed 7501" in page
    assert (folder / "gepa_budget-22_seed-0" / "optimisation.json").exists()
    assert "report:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--held-out-seed", "7401"], "--held-out-seed 7401: that is the registered test set"),
        (["--validation", "10"], "--validation 10: must be between 1 and --n - 1"),
        (["--instruction", "EMPTY"], "the file is empty"),
    ],
)
def test_cli_refuses_bad_input_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture, extra: list[str], message: str
) -> None:
    from supersede_lib.cli import main

    empty = tmp_path / "instruction.txt"
    empty.write_text("  \n")
    if "EMPTY" in extra:
        extra, message = [str(empty) if item == "EMPTY" else item for item in extra], f"{empty}: {message}"
    with LocalOpenAIServer(responder=FakeModels()) as server:
        assert main(["optimise-instruction", *_cli_args(server, tmp_path, *extra)]) == 2
        assert server.request_count == 0
    assert message in capsys.readouterr().err


@pytest.mark.realmodel
def test_adapter_and_reflection_against_llama_cpps_own_server(
    tmp_path: Path, selection: list[Episode], llama_server
) -> None:
    """The real path in small: a provisioned GGUF served by llama.cpp runs one episode under the
    seed instruction and answers one reflection prompt, whose reply is a proposal or counted as skipped."""
    base_url, model_file = llama_server
    model = OpenAIChatModel(model_file.stem, base_url=base_url, api_key_env="SUPERSEDE_FAKE_KEY")
    cached = CachedChatModel(model, ResponseCache(tmp_path / "cache.sqlite"))
    settings = RunSettings(
        concurrency=1, prompt_variant="v1_no_example", max_tokens_notes=48, max_tokens_answer=24
    )
    adapter = NotesInstructionAdapter(cached, settings)
    candidate = {NOTES_COMPONENT: seed_instruction(settings)}
    batch = adapter.evaluate(selection[3:4], candidate, capture_traces=True)  # two sessions: 3 calls
    assert adapter.tally.failed_episodes == 0 and batch.scores[0] in (0.0, 1.0)
    dataset = adapter.make_reflective_dataset(candidate, batch, [NOTES_COMPONENT])
    tally = ReflectionTally()
    proposal, _ = CheckedReflection(ReflectionModel(cached, tally, max_tokens=64)).reflect(
        candidate, dataset, [NOTES_COMPONENT]
    )
    assert tally.calls == 1 and tally.proposals + tally.skipped == 1
    assert (NOTES_COMPONENT in proposal.new_texts) == (tally.proposals == 1)
