"""No secret is ever written: API keys and URL credentials stay out of every file a run leaves."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_episode

from supersede_lib import profiles
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.models.chat import ModelConfigError, redact_credentials, register_secret
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel
from supersede_lib.reproduce.notebooks import strip_machine_paths
from supersede_lib.results.outputs import write_summary

PLANTED_KEY = "sk-planted-SECRET-0123456789abcdef"
PLANTED_PASSWORD = "hunter2-planted-password"
KEY_ENV = "SUPERSEDE_TEST_PLANTED_KEY"


def _files_holding(root: Path, secret: str) -> list[str]:
    return [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and secret in path.read_bytes().decode("utf-8", errors="replace")
    ]


def test_credentials_in_a_base_url_are_refused_without_echoing_them() -> None:
    with pytest.raises(ModelConfigError, match="Bearer") as caught:
        OpenAIChatModel("m", base_url=f"http://user:{PLANTED_PASSWORD}@127.0.0.1:9/v1", api_key_env=KEY_ENV)
    assert PLANTED_PASSWORD not in str(caught.value)


def test_a_profile_with_credentials_in_a_base_url_is_refused_naming_file_and_key() -> None:
    data = {
        "name": "x",
        "model": {"backend": "fake"},
        "frontier": {
            "episodes": {"source": "synthetic", "n": 2},
            "models": [{"backend": "openai", "base_url": f"https://me:{PLANTED_PASSWORD}@api.example/v1"}],
        },
    }
    with pytest.raises(profiles.ProfileError) as caught:
        profiles.validate_profile(data, "configs/x.yaml")
    message = str(caught.value)
    assert message.startswith("configs/x.yaml: frontier.models[0]: base_url carries credentials")
    assert PLANTED_PASSWORD not in message


def test_the_key_is_sent_as_a_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, PLANTED_KEY)
    with LocalOpenAIServer(api_key=PLANTED_KEY) as server:  # answers 401 unless "Bearer <key>"
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key_env=KEY_ENV)
        result = run_condition([make_episode("e0")], "full_context", model, RunSettings(), progress=False)
    assert result.frame["error"].isna().all() or not result.frame["error"].astype(str).str.strip().any()


def test_a_key_echoed_by_the_server_is_in_no_file_the_run_leaves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The server quotes the key in its error body (as OpenAI does for a wrong key); the failed
    question's error reaches the CSV, trajectories, manifest and summary, redacted."""
    monkeypatch.setenv(KEY_ENV, PLANTED_KEY)
    with LocalOpenAIServer(failures=[("echo_key", 400)]) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key_env=KEY_ENV)
        result = run_condition(
            [make_episode("e0"), make_episode("e1")],
            "full_context",
            model,
            RunSettings(concurrency=1),
            output_dir=tmp_path,
            run_name="swept",
            progress=False,
        )
        profile = profiles.validate_profile({"name": "swept", "model": {"backend": "fake"}}, "<test>")
        config = {
            "model": {"base_url": server.base_url, "api_key_env": KEY_ENV},
            "error": result.frame["error"][0],
        }
        write_summary(
            tmp_path,
            profile,
            "02_isolation",
            model="m",
            data="d",
            numbers=[],
            tables=[],
            figures=[],
            config=config,
        )
    errors = [str(error) for error in result.frame["error"] if isinstance(error, str) and error]
    assert errors and "Incorrect API key provided: ***" in (tmp_path / "swept.csv").read_text()
    assert _files_holding(tmp_path, PLANTED_KEY) == []


def test_an_executed_notebook_is_stripped_of_keys(tmp_path: Path) -> None:
    register_secret(PLANTED_KEY)
    notebook = tmp_path / "02.ipynb"
    notebook.write_text(
        f'{{"text": "401: Incorrect API key provided: {PLANTED_KEY} at http://u:{PLANTED_PASSWORD}@h/v1"}}'
    )
    strip_machine_paths(notebook)
    assert _files_holding(tmp_path, PLANTED_KEY) == [] and _files_holding(tmp_path, PLANTED_PASSWORD) == []


def test_short_placeholders_are_not_treated_as_secrets() -> None:
    register_secret("EMPTY")  # a local server's placeholder key must not blank the word everywhere
    assert redact_credentials("EMPTY notes") == "EMPTY notes"


def test_a_key_echoed_by_the_server_is_in_no_log_line_and_no_exception_text(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Runs write no log files of their own (logging goes to the caller's handlers): every record a
    run logs, and the whole text of the exception that stops it (traceback and chained causes), are
    swept for the key the server echoed, as the files are."""
    import logging
    import traceback

    from supersede_lib.eval.runner import RunStoppedError

    monkeypatch.setenv(KEY_ENV, PLANTED_KEY)
    failures = [("echo_key", 400), ("echo_key", 403)]  # a rejected question, then a revoked key
    with caplog.at_level(logging.DEBUG), LocalOpenAIServer(failures=failures) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key_env=KEY_ENV)
        with pytest.raises(RunStoppedError) as stopped:
            run_condition([make_episode(f"e{index}") for index in range(3)], "full_context", model,
                          RunSettings(concurrency=1), output_dir=tmp_path, run_name="swept", progress=False)  # fmt: skip
    exception_text = "".join(traceback.format_exception(stopped.value))
    assert "403" in exception_text and PLANTED_KEY not in exception_text
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "Incorrect API key provided: ***" in logged and PLANTED_KEY not in logged
    assert _files_holding(tmp_path, PLANTED_KEY) == [] and list(tmp_path.glob("*.log")) == []


# --------------------------------------------------------------------------------------------
# A secret in the URL is refused without being echoed; a key too short to redact is refused
# --------------------------------------------------------------------------------------------
URL_CANARY = "CanaryTok3nInTheUrl9f8e7d6c"  # a token-looking value: long, letters and digits mixed
SECRET_URLS = {
    "query": f"http://127.0.0.1:9/v1?key={URL_CANARY}",
    "query of another name": f"http://127.0.0.1:9/v1?api-version=1&x={URL_CANARY}",
    "path segment": f"http://127.0.0.1:9/{URL_CANARY}/v1",
    "key-prefixed path segment": "http://127.0.0.1:9/v1/sk-cnry0",
    "name=value path segment": f"http://127.0.0.1:9/v1;token={URL_CANARY}",
    "fragment": f"http://127.0.0.1:9/v1#{URL_CANARY}",
}
CLEAN_URLS = [
    "http://localhost:8000/v1",
    "https://api.openai.com/v1/",
    "https://openrouter.ai/api/v1",
    "https://api.groq.com/openai/v1",
    "https://example.azure.com/openai/deployments/gpt-4o-mini-2024-07-18",
    "http://127.0.0.1:8080/models/Qwen2.5-1.5B-Instruct-GGUF/v1",
    "http://10.0.0.5:8000/tenants/123e4567-e89b-12d3-a456-426614174000/v1",
]


@pytest.mark.parametrize("where", SECRET_URLS)
def test_a_token_in_the_url_is_refused_without_echoing_it(where: str) -> None:
    url = SECRET_URLS[where]
    with pytest.raises(ModelConfigError) as caught:
        OpenAIChatModel("m", base_url=url, api_key_env=KEY_ENV)
    message = str(caught.value)
    assert URL_CANARY not in message and "sk-cnry0" not in message and "\n" not in message
    assert "http://127.0.0.1:9" in message and KEY_ENV in message  # where, and where the key goes instead
    with pytest.raises(profiles.ProfileError) as refused:
        profiles.validate_profile(
            {"name": "x", "model": {"backend": "openai", "model": "m", "base_url": url}}, "c.yaml"
        )
    assert "c.yaml: model: base_url" in str(refused.value) and URL_CANARY not in str(refused.value)


@pytest.mark.parametrize("url", CLEAN_URLS)
def test_ordinary_base_urls_are_accepted(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, PLANTED_KEY)
    assert OpenAIChatModel("m", base_url=url, api_key_env=KEY_ENV).base_url == url


@pytest.mark.parametrize("short_key", ["k", "wrong", "sk-1234"])
def test_a_key_too_short_to_redact_is_refused_naming_the_variable_not_the_value(
    short_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, short_key)
    with pytest.raises(ModelConfigError) as caught:
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV)
    message = str(caught.value)
    assert KEY_ENV in message and f"{len(short_key)} characters" in message
    assert f" {short_key} " not in f" {message} " and "'" + short_key not in message


def test_a_diagnose_run_writes_no_canary_anywhere(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The canary sweep: a URL holding a canary (every token-looking place) and a key too short to
    redact are refused before anything runs; a run with a canary key that the server echoes in an error
    body completes. Every file under --out (results, cache, manifests, CSV, trajectories, summary, page),
    every file the run touched in the repository, the terminal and every log record hold 0 canaries."""
    import logging
    import time

    from supersede_lib.cli import diagnose

    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)  # diagnose sets it for its process
    started = time.time()
    short_canary = "cnry7"  # 5 characters
    arguments = ["--model", "fake-model", "--n", "2", "--difficulty", "easy", "--out", str(tmp_path)]
    with caplog.at_level(logging.DEBUG):
        for url in SECRET_URLS.values():
            assert diagnose.main(["--base-url", url, *arguments, "--api-key-env", KEY_ENV]) == 2
        with LocalOpenAIServer(failures=[("echo_key", 400)]) as server:
            monkeypatch.setenv(KEY_ENV, short_canary)
            assert diagnose.main(["--base-url", server.base_url, *arguments, "--api-key-env", KEY_ENV]) == 2
            monkeypatch.setenv(KEY_ENV, PLANTED_KEY)
            # a given pace skips the timed probe call (which the rejection would stop), so the run writes
            # its files, each question failing alone on the echoed key
            run = [
                "--base-url",
                server.base_url,
                *arguments,
                "--api-key-env",
                KEY_ENV,
                "--seconds-per-call",
                "1",
            ]
            assert diagnose.main(run) in (0, 1)
            assert server.request_count > 0
    terminal = capfd.readouterr()
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert {".csv", ".jsonl", ".json", ".md"} <= {path.suffix for path in written}  # the run wrote its files
    touched = [
        path
        for path in profiles.REPO_ROOT.rglob("*")
        if ".git" not in path.parts and path.is_file() and path.stat().st_mtime >= started
    ]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "Incorrect API key provided: ***" in (terminal.out + terminal.err + logged + _all_text(written))
    for canary in (PLANTED_KEY, URL_CANARY, "sk-cnry0", short_canary):
        assert _files_holding(tmp_path, canary) == []
        assert [str(path) for path in touched if canary in _all_text([path])] == []
        assert canary not in terminal.out and canary not in terminal.err and canary not in logged


def _all_text(paths: list[Path]) -> str:
    return "\n".join(path.read_bytes().decode("utf-8", errors="replace") for path in paths)
