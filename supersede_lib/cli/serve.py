"""Serve a GGUF model over llama.cpp's OpenAI-compatible HTTP server, for tools that speak only HTTP.

    python -m supersede_lib serve                         # the default model, on a free port
    python -m supersede_lib serve path/to/model.gguf --port 8000 --n-ctx 8192 --threads 2

It prints the base URL to give a client (`vf-eval supersede -b <url> -k LOCAL_KEY ...`) and serves
until Ctrl-C. The model is a path, or a file name looked up like the embedded default
(`$SUPERSEDE_MODEL_DIR`, `~/.cache/supersede/models/`, else downloaded once). Port 0, the default,
takes a free port; a port already in use is refused with one line before the model is loaded.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from supersede_lib.models.gguf import DEFAULT_GGUF_FILE, resolve_default_gguf, serve_embeddings

HOST = "127.0.0.1"


class PortTaken(RuntimeError):
    """The port asked for is already in use."""


def check_port(host: str, port: int) -> None:
    """Refuse a port another process holds (0: the server picks a free one, nothing to check)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as error:
            raise PortTaken(
                f"port {port} on {host} is taken ({error.strerror}): pass another --port, "
                "or leave --port out for a free one"
            ) from error


def model_path(model: str | None) -> Path:
    """A GGUF path as given, or a file name found (or fetched) like the embedded default."""
    if model and Path(model).expanduser().is_file():
        return Path(model).expanduser()
    if model and ("/" in model or model.startswith("~")):
        raise FileNotFoundError(f"no GGUF file at {model}")
    return resolve_default_gguf(filename=model or DEFAULT_GGUF_FILE)


def start_server(path: Path, *, host: str, port: int, n_ctx: int, threads: int):
    """llama.cpp's HTTP server on `path` (xllamacpp, in this process); returns it and its base URL."""
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(path)
    params.n_ctx = n_ctx
    params.cpuparams.n_threads = threads
    params.hostnames = [host]
    params.port = port
    serve_embeddings(params)  # for memory policies that search (Mem0)
    server = xlc.Server(params)
    return server, f"{server.listening_address.rstrip('/')}/v1"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "model", nargs="?", default=None, help=f"a .gguf path or file name (default {DEFAULT_GGUF_FILE})"
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free one)")
    parser.add_argument("--host", default=HOST, help=f"address to listen on (default {HOST})")
    parser.add_argument("--n-ctx", type=int, default=8192, help="context window (full context needs more)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_port(args.host, args.port)
        path = model_path(args.model)
    except (PortTaken, FileNotFoundError) as error:
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2
    server, base_url = start_server(
        path, host=args.host, port=args.port, n_ctx=args.n_ctx, threads=args.threads
    )
    print(f"serving {path.name} at {base_url} (Ctrl-C stops it)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        del server
    return 0
