"""The response cache keys a self-hosted server's replies on what served them: llama.cpp and vLLM answer
under any model name, so two servers under one name must never share replies (unless asked to, with a
`cache_namespace`), while in-process models and OpenAI's endpoint keep the keys their records carry."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from supersede_lib import profiles
from supersede_lib.cli import diagnose
from supersede_lib.models import cache as cache_module
from supersede_lib.models.cache import CachedChatModel, RecordedRepliesOnly, ResponseCache, cache_key
from supersede_lib.models.local_server import UNKNOWN_ANSWER, LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel

MESSAGES = [{"role": "user", "content": "Where does Ana live now?"}]
SERVED_NAME = "llama-local"  # the name both servers answer under


def _ask(base_url: str, cache_path: Path, **options) -> tuple[CachedChatModel, str, bool]:
    model = CachedChatModel(
        OpenAIChatModel(SERVED_NAME, base_url=base_url, **options), ResponseCache(cache_path)
    )
    result = asyncio.run(model.achat(MESSAGES))
    return model, result.text, result.cached


def test_a_second_server_under_the_same_name_is_asked_and_its_own_reply_kept(tmp_path):
    cache_path = tmp_path / "responses.sqlite"
    with LocalOpenAIServer(model=SERVED_NAME, responder=lambda messages: "Lisbon") as server_a:
        assert _ask(server_a.base_url, cache_path)[1:] == ("Lisbon", False)
    with LocalOpenAIServer(model=SERVED_NAME, responder=lambda messages: UNKNOWN_ANSWER) as server_b:
        assert _ask(server_b.base_url, cache_path)[1:] == (UNKNOWN_ANSWER, False)
        assert server_b.request_count == 1  # B answered for itself, not A's stored reply


def test_a_model_swapped_behind_the_same_port_is_asked_again_and_a_restart_still_hits(tmp_path):
    cache_path = tmp_path / "responses.sqlite"
    with LocalOpenAIServer(model="qwen-1.5b.gguf", responder=lambda messages: "Lisbon") as first:
        port = first.port
        _ask(first.base_url, cache_path)
    with LocalOpenAIServer(
        port=port, model="qwen-1.5b.gguf", responder=lambda messages: "other"
    ) as restarted:
        assert _ask(restarted.base_url, cache_path)[1:] == ("Lisbon", True)  # same file, same port: resumed
        assert restarted.request_count == 0
    with LocalOpenAIServer(
        port=port, model="smollm-135m.gguf", responder=lambda messages: "Porto"
    ) as swapped:
        assert _ask(swapped.base_url, cache_path)[1:] == ("Porto", False)  # another file under one name
        assert swapped.request_count == 1


def test_a_chosen_namespace_shares_replies_across_endpoints_on_purpose(tmp_path):
    cache_path = tmp_path / "responses.sqlite"
    with LocalOpenAIServer(model=SERVED_NAME, responder=lambda messages: "Lisbon") as server_a:
        shared, _, _ = _ask(server_a.base_url, cache_path, cache_namespace="lab-qwen")
    with LocalOpenAIServer(model=SERVED_NAME, responder=lambda messages: UNKNOWN_ANSWER) as server_b:
        again = _ask(server_b.base_url, cache_path, cache_namespace="lab-qwen")
        assert again[1:] == ("Lisbon", True) and server_b.request_count == 0
    params = {"max_tokens": None, "temperature": 0.0}
    assert shared.key_for(MESSAGES, None, 0.0, 0) == cache_key("lab-qwen", SERVED_NAME, MESSAGES, params, 0)
    assert "served_by" not in shared.stats()


def test_in_process_models_and_openais_endpoint_keep_their_keys(tmp_path, monkeypatch):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    params = {"max_tokens": 8, "temperature": 0.0}
    recorded = CachedChatModel(RecordedRepliesOnly("Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", "embedded"), cache)
    assert recorded.key_for(MESSAGES, 8, 0.0, 0) == cache_key(
        "embedded", "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", MESSAGES, params, 0
    )  # the committed records' keys
    monkeypatch.setenv("SUPERSEDE_TEST_OPENAI_KEY", "sk-test-served-identity-000")
    hosted = OpenAIChatModel("gpt-4.1-mini", api_key_env="SUPERSEDE_TEST_OPENAI_KEY")
    assert hosted.served_identity() is None  # OpenAI's names are its models: nothing is asked
    assert CachedChatModel(hosted, cache).key_for(MESSAGES, 8, 0.0, 0) == cache_key(
        "openai", "gpt-4.1-mini", MESSAGES, params, 0
    )


def test_a_server_not_reached_is_asked_again_and_keyed_apart(tmp_path, monkeypatch):
    with LocalOpenAIServer(model=SERVED_NAME) as placeholder:
        port = placeholder.port
    model = OpenAIChatModel(SERVED_NAME, base_url=f"http://127.0.0.1:{port}/v1/")
    cached = CachedChatModel(model, ResponseCache(tmp_path / "responses.sqlite"))
    unreached = {"endpoint": f"http://127.0.0.1:{port}/v1", "unreachable": True}
    assert model.served_identity() == unreached and cached.served_by() == unreached
    with LocalOpenAIServer(port=port, model=SERVED_NAME):
        assert cached.served_by() == unreached  # not asked at every call: a probe may take seconds
        monkeypatch.setattr(cache_module, "IDENTITY_RETRY_S", 0.0)
        identity = cached.served_by()
    assert identity["models"][0]["id"] == SERVED_NAME and "unreachable" not in identity
    assert "created" not in identity["models"][0]  # a server's clock is not what served


def test_the_cache_endpoint_holds_no_credentials_query_or_trailing_slash():
    from supersede_lib.models.openai_api import cache_endpoint

    assert cache_endpoint("HTTP://Host.example:8000/v1/?key=sk-secret#frag") == "http://host.example:8000/v1"
    assert cache_endpoint("http://[::1]:8080/v1") == "http://[::1]:8080/v1"


def _diagnose(base_url: str, out: Path, *extra: str) -> int:
    arguments = ["--model", SERVED_NAME, "--n", "2", "--difficulty", "easy", "--out", str(out), *extra]
    return diagnose.main(["--base-url", base_url, *arguments])


def _calls(out: Path) -> list[tuple[int, int]]:
    manifests = [json.loads(path.read_text()) for path in sorted(out.rglob("*.manifest.json"))]
    return [(manifest["totals"]["calls"], manifest["totals"]["cached_calls"]) for manifest in manifests]


def test_diagnose_reports_server_b_after_server_a_under_one_name(tmp_path, monkeypatch):
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)  # diagnose sets it for its process
    with LocalOpenAIServer(model=SERVED_NAME) as server_a:
        assert _diagnose(server_a.base_url, tmp_path) == 0
    with LocalOpenAIServer(model=SERVED_NAME, responder=lambda messages: UNKNOWN_ANSWER) as server_b:
        assert _diagnose(server_b.base_url, tmp_path) == 0
        assert server_b.request_count > 0
    assert all(cached == 0 for _, cached in _calls(tmp_path))  # nothing of A's replayed as B's
    report = next(tmp_path.rglob("DIAGNOSIS.md")).read_text()
    assert f"Served by `{server_b.base_url}`" in report and f"GET /v1/models: `{SERVED_NAME}`" in report
    assert "keyed on this endpoint and what it serves" in report
    full_context_row = next(
        line for line in report.splitlines() if line.startswith("| full context accuracy")
    )
    assert full_context_row.split(" | ")[-1].startswith("0.0% [")  # B's own answers, not A's 100%


def test_diagnose_with_a_cache_namespace_shares_on_purpose_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)
    with LocalOpenAIServer(model=SERVED_NAME) as server_a:
        assert _diagnose(server_a.base_url, tmp_path, "--cache-namespace", "lab-qwen") == 0
    with LocalOpenAIServer(model=SERVED_NAME, responder=lambda messages: UNKNOWN_ANSWER) as server_b:
        assert _diagnose(server_b.base_url, tmp_path, "--cache-namespace", "lab-qwen") == 0
        assert server_b.request_count == 0
    assert all(calls == cached for calls, cached in _calls(tmp_path))
    assert (
        "shared on purpose under the namespace `lab-qwen`" in next(tmp_path.rglob("DIAGNOSIS.md")).read_text()
    )
    assert _diagnose(server_b.base_url, tmp_path, "--cache-namespace", " ", "--estimate-only") == 2


@pytest.mark.realmodel
def test_llama_cpps_identity_is_probed_and_recorded(tmp_path, llama_server):
    base_url, model_file = llama_server
    model = CachedChatModel(
        OpenAIChatModel(SERVED_NAME, base_url=base_url, timeout_s=300), ResponseCache(tmp_path / "r.sqlite")
    )
    result = asyncio.run(model.achat(MESSAGES, max_tokens=4))
    assert not result.cached and result.system_fingerprint  # llama.cpp names its build in every reply
    served = json.loads(model.stats()["served_by"])
    assert served["endpoint"] == base_url.rstrip("/")
    assert [entry["id"] for entry in served["models"]] == [str(model_file)]  # any name: its one model
    assert served["models"][0]["meta"]["n_params"] > 0 and served["server"]["model_path"] == str(model_file)
    with LocalOpenAIServer(model=SERVED_NAME, responder=lambda messages: UNKNOWN_ANSWER) as other:
        assert _ask(other.base_url, tmp_path / "r.sqlite")[1:] == (UNKNOWN_ANSWER, False)


def test_server_info_and_the_served_identity_share_one_probe(tmp_path):
    """GET /v1/models and GET /props once each, whichever of the two asks first and however often."""
    with LocalOpenAIServer(model=SERVED_NAME, slots=2) as server:
        model = OpenAIChatModel(SERVED_NAME, base_url=server.base_url)
        assert model.server_info()["total_slots"] == 2
        assert model.served_identity()["models"][0]["id"] == SERVED_NAME
        model.server_info(), model.served_identity()
        assert sorted(server.get_paths) == ["/props", "/v1/models"]


def test_a_diagnose_run_probes_its_server_once(tmp_path, monkeypatch):
    """The timed probe calls before the run and the run itself use one model: one GET of each a run."""
    from test_diagnose_incomplete import _arguments

    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)  # diagnose sets it for its process
    with LocalOpenAIServer(slots=1) as server:
        assert diagnose.main(["--base-url", server.base_url, *_arguments(tmp_path, 2)]) == 0
        assert sorted(server.get_paths) == ["/props", "/v1/models"]


def test_a_diagnose_process_ends_without_a_client_left_on_a_closed_loop(tmp_path):
    """The timed probe runs on the runner's loop, so the one HTTP client serves probe and run and is
    closed where it was opened: no 'Event loop is closed' traceback when the process ends."""
    import subprocess
    import sys

    from test_diagnose_incomplete import _arguments

    with LocalOpenAIServer(slots=1) as server:
        finished = subprocess.run(
            [
                sys.executable,
                "-m",
                "supersede_lib",
                "diagnose",
                "--base-url",
                server.base_url,
                *_arguments(tmp_path, 2),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert "Event loop is closed" not in finished.stderr and "Traceback" not in finished.stderr
