"""`diagnose` never turns a dead server into a finding, and never leaves an old page looking current.

A server that dies mid-run fails questions; those questions leave the paired comparison, the page
opens with "incomplete", the exit code says so, and the same command finishes the table. A run that
stops (a 401) leaves the earlier run's page marked outdated; a page is built from its own run only.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from pathlib import Path

import pytest

from supersede_lib import diagnosis, profiles
from supersede_lib.cli import diagnose
from supersede_lib.models.local_server import LocalOpenAIServer, ScriptedFailure, default_responder
from supersede_lib.models.openai_api import OpenAIChatModel


@pytest.fixture(autouse=True)
def _fast_and_contained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)  # diagnose sets it for its process
    monkeypatch.setattr(OpenAIChatModel, "backoff_delay", lambda self, *args, **kwargs: 0.0)


CITIES = ("Oslo", "Lima", "Quito", "Hanoi", "Dakar", "Perth", "Turin", "Bergen", "Cusco", "Porto")


def _records(path: Path) -> Path:
    """Ten LongMemEval knowledge-update records (two sessions each), each asking its own question."""
    records = []
    for index, city in enumerate(CITIES):
        sessions = [
            [{"role": "user", "content": f"Case {index}: I live in Madrid.", "has_answer": True}],
            [{"role": "user", "content": f"Case {index}: I live in {city} now.", "has_answer": True}],
        ]
        records.append(
            {
                "question_id": f"case_{index}",
                "question_type": "knowledge-update",
                "question": f"Which city do I live in? (case {index})",
                "answer": city,
                "question_date": "2023/06/01 (Thu) 10:00",
                "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/20 (Sat) 09:00"],
                "haystack_session_ids": [f"s{index}a", f"s{index}b"],
                "answer_session_ids": [f"s{index}a", f"s{index}b"],
                "haystack_sessions": sessions,
            }
        )
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _dies_after(requests: int):
    """A model that knows every answer, behind a server that fails every request after `requests` (503)."""
    counter, lock = itertools.count(1), threading.Lock()

    def responder(messages: list[dict]) -> str:
        with lock:
            served = next(counter)
        if served > requests:
            raise ScriptedFailure(("status", 503))
        text = messages[-1]["content"]
        match = re.search(r"\(case (\d)\)", text)
        if match and "New conversation (" not in text:
            return CITIES[int(match.group(1))]
        return default_responder(messages)

    return responder


def _arguments(out: Path, n: int) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    data = _records(out / "records.json")
    return ["--model", "fake-model", "--data", str(data), "--n", str(n), "--out", str(out)]


def _table(out: Path) -> dict[str, str]:
    """Table 1's measure -> ours, from its CSV."""
    import pandas as pd

    frame = pd.read_csv(next(out.rglob("table1_isolation.csv")))
    return dict(zip(frame["measure"], frame.iloc[:, 2], strict=True))


def test_a_server_that_dies_mid_run_is_incomplete_not_a_finding(tmp_path: Path, capsys) -> None:
    # 10 full-context calls, then 3 per bounded-memory question: 7 of its 10 questions fail
    with LocalOpenAIServer(responder=_dies_after(19)) as server:
        code = diagnose.main(["--base-url", server.base_url, *_arguments(tmp_path, 10)])
        port = server.port
    page = next(tmp_path.rglob(diagnosis.REPORT_FILE)).read_text()
    first_lines = "\n".join(page.splitlines()[:3])
    assert code != 0
    assert "incomplete:" in first_lines and "of 10 failed" in first_lines
    assert "re-run the same command to finish" in first_lines
    table = _table(tmp_path)
    assert table["gap (points)"] == "0.0"  # the failed questions are not scored wrong
    assert table["McNemar b (full right, bounded wrong)"] == "0"
    assert "failed, left out" in table["bounded memory (B=300) accuracy"]
    assert "incomplete" in capsys.readouterr().err

    # the server is back on its port (another endpoint is another server to the cache): the same
    # command finishes the table
    with LocalOpenAIServer(port=port, responder=_dies_after(10**6)) as server:
        assert diagnose.main(["--base-url", server.base_url, *_arguments(tmp_path, 10)]) == 0
        repeated = server.request_count
    page = next(tmp_path.rglob(diagnosis.REPORT_FILE)).read_text()
    assert "incomplete" not in page and "OUTDATED" not in page
    assert _table(tmp_path)["bounded memory (B=300) accuracy"].startswith("100.0%")
    assert repeated == 7 * 3  # only the failed questions were asked again: the cache kept the rest


def test_a_stopped_run_marks_the_earlier_page_outdated(tmp_path: Path) -> None:
    with LocalOpenAIServer() as server:
        assert diagnose.main(["--base-url", server.base_url, *_arguments(tmp_path, 2)]) == 0
    page_path = next(tmp_path.rglob(diagnosis.REPORT_FILE))
    folder = page_path.parent
    with LocalOpenAIServer(responder=_dies_after(0), failures=[("status", 401)] * 50) as server:
        assert diagnose.main(["--base-url", server.base_url, *_arguments(tmp_path, 3)]) == 2
    page = page_path.read_text()
    assert page.startswith("> **OUTDATED**") and "401" in page.splitlines()[0]
    assert json.loads((folder / "summary.json").read_text())["outdated"]
    assert (folder / "table1_isolation.md").read_text().startswith("> **OUTDATED**")


def test_a_page_reads_only_its_own_runs_manifests(tmp_path: Path) -> None:
    with LocalOpenAIServer() as server:
        assert diagnose.main(["--base-url", server.base_url, *_arguments(tmp_path, 2)]) == 0
        folder = next(tmp_path.rglob(diagnosis.REPORT_FILE)).parent
        other = folder / "bounded_memory__fake-model__B150.manifest.json"  # another run in the same folder
        other.write_text(json.dumps({"run_name": "another-run", "totals": {"questions": 99}}))
        assert diagnose.main(["--base-url", server.base_url, *_arguments(tmp_path, 2)]) == 0
    page = (folder / diagnosis.REPORT_FILE).read_text()
    assert "another-run" not in page
    assert not list(folder.glob("*.tmp"))  # every file was written whole, then moved into place


def test_a_second_run_on_the_same_folder_stops_at_once_naming_the_lock_and_the_other_run(
    tmp_path: Path, capsys
) -> None:
    """Two runs at once on one model would share run names, tables and the page: the second stops at
    once, naming the lock and the process that holds it, and the first's page is its own."""
    import os
    import subprocess
    import sys
    import time

    with LocalOpenAIServer(latency_s=0.3) as server:
        first_args = ["--base-url", server.base_url, *_arguments(tmp_path / "first", 3)]
        first_args[first_args.index("--out") + 1] = str(tmp_path)
        first = subprocess.Popen(
            [sys.executable, "-m", "supersede_lib", "diagnose", *first_args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            deadline = time.monotonic() + 60
            lock = None
            while lock is None or f"pid {first.pid} " not in lock.read_text():
                assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
                time.sleep(0.1)
                lock = next(tmp_path.rglob(diagnosis.LOCK_FILE), None)
            started = time.perf_counter()
            code = diagnose.main(["--base-url", server.base_url, *_arguments(tmp_path, 2)])
            assert code == 2 and time.perf_counter() - started < 5
            assert first.poll() is None  # it was still running
            assert first.wait(timeout=120) == 0, first.stderr.read()
        finally:
            first.kill()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(lock) in err and f"pid {first.pid} " in err and "--out" in err
    page = (lock.parent / diagnosis.REPORT_FILE).read_text()
    assert "OUTDATED" not in page and "n = 3" in page  # the first run's page, untouched by the second
    assert lock.read_text() == ""  # released: the next run may start
    assert diagnose.main(["--base-url", "http://127.0.0.1:9/v1", *_arguments(tmp_path, 2)]) == 2
    assert "another diagnose run" not in capsys.readouterr().err
