"""`python -m supersede_lib diagnose`: Table 1 for any OpenAI-compatible endpoint, estimated first,
resumable, on one page; against the fake server and against llama.cpp's own HTTP server."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from supersede_lib import profiles
from supersede_lib.cli import diagnose
from supersede_lib.models.local_server import LocalOpenAIServer


def _totals(out: Path) -> list[dict]:
    return [json.loads(path.read_text())["totals"] for path in sorted(out.rglob("*.manifest.json"))]


@pytest.fixture(autouse=True)
def _restore_output_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)  # diagnose sets it for its process


def test_diagnose_estimates_runs_reports_and_resumes_without_paying_twice(tmp_path: Path, capsys) -> None:
    arguments = ["--model", "fake-model", "--n", "3", "--difficulty", "easy", "--out", str(tmp_path)]
    with LocalOpenAIServer() as server:
        assert diagnose.main(["--base-url", server.base_url, *arguments]) == 0
        first_requests = server.request_count
        assert diagnose.main(["--base-url", server.base_url, *arguments]) == 0
        assert server.request_count == first_requests  # the second run came from the response cache
    printed = capsys.readouterr().out
    estimated_calls = int(printed.split("about ")[1].split(" calls")[0])
    assert estimated_calls == first_requests  # one notes call per session, one answer, one full context
    report = next(tmp_path.rglob("DIAGNOSIS.md")).read_text()
    assert "## Table 1: full context vs bounded memory" in report and "programmatic matcher" in report
    assert "no price known" in report  # a local server's names are not OpenAI's: no guessed price
    assert all(totals["failed_questions"] == 0 for totals in _totals(tmp_path))


def test_estimate_only_prices_openai_and_makes_no_call(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("SUPERSEDE_TEST_OPENAI_KEY", "sk-test-estimate-only-000")
    arguments = ["--base-url", "https://api.openai.com/v1", "--model", "gpt-4.1-mini", "--n", "4"]
    assert diagnose.main([*arguments, "--api-key-env", "SUPERSEDE_TEST_OPENAI_KEY", "--estimate-only"]) == 0
    printed = capsys.readouterr().out
    assert "at OpenAI list prices" in printed and "s a call and 8 in flight (assumed" in printed
    assert diagnose.main([*arguments, "--api-key-env", "SUPERSEDE_TEST_OPENAI_KEY", "--estimate-only",
                          "--seconds-per-call", "3", "--concurrency", "2"]) == 0  # fmt: skip
    calls = int((printed := capsys.readouterr().out).split("about ")[1].split(" calls")[0])
    assert f"about {calls * 3 / 2 / 60:.1f} min at 3 s a call and 2 in flight (as given" in printed


def test_a_base_url_with_credentials_is_refused_before_anything_runs(capsys) -> None:
    code = diagnose.main(
        ["--base-url", "http://me:pw-secret@127.0.0.1:9/v1", "--model", "m", "--estimate-only"]
    )
    assert code == 2 and "pw-secret" not in capsys.readouterr().err


def test_diagnose_against_a_closed_port_stops_at_once_with_one_line_naming_the_url(
    tmp_path: Path, capsys
) -> None:
    """Nothing listens: no retries, no 'failed n/n', one STOPPED line naming the URL, well under 5 s,
    through the runner's own long-lived loop (the one `diagnose` uses)."""
    with socket.socket() as probe:  # a port that was free a moment ago: closed
        probe.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    arguments = ["--model", "m", "--n", "2", "--difficulty", "easy", "--out", str(tmp_path)]
    started = time.perf_counter()
    code = diagnose.main(["--base-url", base_url, *arguments])
    elapsed = time.perf_counter() - started
    stopped = [line for line in capsys.readouterr().err.splitlines() if line.startswith("STOPPED")]
    assert code == 2 and elapsed < 5, elapsed
    assert len(stopped) == 1 and f"cannot reach {base_url}: connection refused" in stopped[0]
    assert not list(tmp_path.rglob("DIAGNOSIS.md"))


@pytest.mark.realmodel
def test_diagnose_against_llama_cpps_own_http_server(tmp_path: Path, llama_server) -> None:
    """A real OpenAI-compatible server (llama.cpp's, through the embedded engine's HTTP port), not the fake."""
    base_url, model_file = llama_server
    arguments = ["--model", model_file.stem, "--n", "2", "--difficulty", "easy", "--out", str(tmp_path)]
    assert diagnose.main(["--base-url", base_url, *arguments]) == 0
    totals = _totals(tmp_path)
    assert len(totals) == 2 and all(
        t["failed_questions"] == 0 and t["calls"] > t["cached_calls"] for t in totals
    )
    report = next(tmp_path.rglob("DIAGNOSIS.md")).read_text()
    assert "## Table 1" in report
    assert f"llama.cpp serves `{model_file}`" in report and "system_fingerprint `" in report  # what served
