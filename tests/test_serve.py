"""`python -m supersede_lib serve`: a free port by default, the URL printed, a taken port refused in one line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request

import pytest
from conftest import small_model_file

from supersede_lib.cli import serve


def test_a_taken_port_is_refused_before_the_model_loads(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as holder:
        holder.bind((serve.HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert serve.main(["no-such-model.gguf", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"port {port}" in err and "leave --port out" in err


def test_port_zero_needs_no_check_and_a_missing_path_is_named() -> None:
    serve.check_port(serve.HOST, 0)
    with pytest.raises(FileNotFoundError, match="no GGUF file at /nowhere/model.gguf"):
        serve.model_path("/nowhere/model.gguf")


@pytest.mark.skipif(small_model_file() is None, reason="no small GGUF model provisioned")
def test_serves_a_gguf_on_a_free_port_and_prints_its_url() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "supersede_lib", "serve", str(small_model_file()), "--n-ctx", "2048"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("serving ") and "/v1" in line, line
        base_url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(f"{base_url}/models", timeout=30) as response:
            listed = json.loads(response.read())
        assert listed.get("data") or listed.get("models"), listed  # the served model is listed
    finally:
        process.terminate()
        process.wait(timeout=30)
