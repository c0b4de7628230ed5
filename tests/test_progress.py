"""One progress bar per study (`eval.progress.StudyProgress`): what it counts and what it writes.

Runs drive the scripted `CityModel` of test_runner (4 calls per 3-session question, 10 + 3 tokens
each) through the real runner, some through a `CachedChatModel` so a second run is all cache hits.
"""

from __future__ import annotations

import time

from conftest import make_episode

from supersede_lib.eval.progress import StudyProgress, progress_bar
from supersede_lib.eval.runner import RunSettings, run_condition, run_conditions
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from tests.test_runner import CityModel

CALLS_PER_QUESTION = 4  # three notes rewrites and the answer
TOKENS_PER_CALL = 13


def test_one_bar_counts_both_runs_and_tells_live_calls_from_cache_hits(tmp_path, capsys) -> None:
    cache = ResponseCache(tmp_path / "cache.db")
    episodes = [make_episode(f"ep-{index}") for index in range(3)]
    with StudyProgress(2 * len(episodes), "09_progress_study (test)") as bar:
        for _ in range(2):  # the second run replays every reply of the first
            model = CachedChatModel(CityModel(), cache)
            run_condition(episodes, "bounded_memory", model, RunSettings(concurrency=2), progress=bar)
            assert bar.current_run is not None and "bounded_memory" in bar.current_run
    calls = len(episodes) * CALLS_PER_QUESTION
    assert bar.done == bar.total == 6
    assert (bar.live_calls, bar.cached_calls) == (calls, calls)
    assert bar.live_tokens == calls * TOKENS_PER_CALL  # cache hits add no tokens
    assert bar.live_tokens_per_s > 0
    shown = capsys.readouterr().err
    assert "09_progress_study (test)" in shown and "6/6" in shown
    assert "live=12, cached=12, tok_s=" in shown and ", run=bounded_memory__city-model__B300" in shown


def test_a_direct_run_keeps_a_bar_of_its_own(capsys) -> None:
    episodes = [make_episode(f"ep-{index}") for index in range(3)]
    run_condition(episodes, "full_context", CityModel(), progress=True)
    shown = capsys.readouterr().err
    assert "full_context | city-model" in shown and "/3" in shown


def test_disabled_progress_writes_nothing_but_still_counts(capsys) -> None:
    episodes = [make_episode(f"ep-{index}") for index in range(2)]
    run_condition(episodes, "bounded_memory", CityModel(), progress=False)
    run_conditions(episodes, ["bounded_memory", "full_context"], [CityModel()], progress=False)
    with StudyProgress(len(episodes), "silent study", enabled=False) as bar:
        run_condition(episodes, "bounded_memory", CityModel(), progress=bar)
    assert capsys.readouterr().err == ""
    assert (bar.done, bar.live_calls, bar.cached_calls) == (2, 2 * CALLS_PER_QUESTION, 0)


def test_run_conditions_counts_every_pair_on_the_bar_it_is_given() -> None:
    episodes = [make_episode(f"ep-{index}") for index in range(2)]
    with StudyProgress(8, "pairs", enabled=False) as bar:
        run_conditions(
            episodes, ["bounded_memory", "full_context"], [CityModel("a"), CityModel("b")], progress=bar
        )
    assert bar.done == 8
    assert bar.live_calls == 2 * 2 * CALLS_PER_QUESTION + 2 * 2  # full context: one answer call each


def test_a_bar_passed_down_is_left_open_and_an_own_bar_is_closed() -> None:
    with StudyProgress(1, "outer") as outer:
        with progress_bar(outer, total=99, description="inner") as shared:
            assert shared is outer
        with progress_bar(True, total=99, description="inner") as own:
            assert own is not outer and own.total == 99
        assert not outer._bar.disable  # tqdm marks a closed bar disabled
        assert own._bar.disable


def test_time_between_runs_does_not_count_toward_tokens_per_second() -> None:
    with StudyProgress(1, "rate", enabled=False) as bar:
        with bar.running("only run"):
            time.sleep(0.05)
            bar.question_done({"turns": [{"cached": False, "prompt_tokens": 90, "completion_tokens": 10}]})
        measured = bar.live_tokens_per_s
        time.sleep(0.05)  # e.g. the next model loading
        assert bar.live_tokens_per_s == measured <= 100 / 0.05
