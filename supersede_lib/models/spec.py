"""The one place a model spec (a plain dict from a profile YAML) becomes a `ChatModel`.

`make_chat_model(spec)` picks the backend (`openai_api`, `gguf` or `hf`), rejects keys that
backend does not take, and optionally wraps the model in the persistent response cache.
"""

from __future__ import annotations

from typing import Any

from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.chat import ChatModel
from supersede_lib.models.engine import DeferredEmbeddedModel, make_embedded_model
from supersede_lib.models.gguf import DEFAULT_GGUF_FILE, find_local_gguf
from supersede_lib.models.hf import HFChatModel
from supersede_lib.models.numbers import check_integers, check_numbers
from supersede_lib.models.openai_api import OpenAIChatModel

BACKENDS = ("openai", "embedded", "hf")
_OPENAI_KEYS = frozenset(
    {
        "model",
        "base_url",
        "api_key_env",
        "timeout_s",
        "max_retries",
        "backoff_base_s",
        "backoff_max_s",
        "retry_after_max_s",
        "extra_params",
        "reasoning_effort",
        "reasoning_token_floor",
        "cache_namespace",
        "reasoning",
        "name",
    }
)
_EMBEDDED_KEYS = frozenset(
    {
        "model_path",
        "model_dir",
        "filename",
        "model_file",  # alias of filename
        "repo_id",
        "revision",  # the hub commit, branch or tag a download is pinned to
        "sha256",  # the file's SHA-256, checked after a download (else upstream's LFS hash)
        "n_ctx",
        "n_threads",
        "default_max_tokens",
        "verbose",
        "name",
        "engine",  # auto | llamacpp | transformers (models.engine)
        "max_batch_size",
        "batch_window_s",
        "lora_adapter",  # a PEFT folder or kept adapter record, applied by llama.cpp (models.lora_gguf)
    }
)


def infer_backend(spec: dict[str, Any]) -> str:
    """`spec["backend"]` if given; else "embedded" for a model file (or nothing), "openai" for a URL/model id."""
    if spec.get("backend"):
        return str(spec["backend"])
    if any(key in spec for key in ("model_path", "model_dir")):
        return "embedded"
    if any(key in spec for key in ("base_url", "api_key_env", "model")):
        return "openai"
    return "embedded"


# numeric settings a spec may give, with the bounds a sane run stays inside
NUMBER_BOUNDS: dict[str, tuple[float, float]] = {
    "timeout_s": (0.001, 3600),
    "max_retries": (0, 50),
    "backoff_base_s": (0, 600),
    "backoff_max_s": (0, 3600),
    "retry_after_max_s": (0, 3600),
    "reasoning_token_floor": (0, 1_000_000),
    "n_ctx": (256, 1_048_576),
    "n_threads": (1, 1024),
    "default_max_tokens": (1, 1_000_000),
    "max_batch_size": (1, 4096),
    "batch_window_s": (0, 60),
}
# of those, the ones that count something: a float there is a typo, refused with the key's name
INTEGER_KEYS = frozenset(
    {"max_retries", "reasoning_token_floor", "n_ctx", "n_threads", "default_max_tokens", "max_batch_size"}
)


def check_model_spec(spec: dict[str, Any]) -> None:
    """Raise `ValueError` for a key the spec's backend does not take or a number out of bounds, so a
    profile fails when it is read (naming file and key), not when the model is first built.
    `backend: fake` (the smoke profile's local server) and `hf` (any `HFChatModel` keyword) pass."""
    options = {key: value for key, value in spec.items() if key not in ("backend", "cache_path")}
    backend = infer_backend(spec)
    if backend == "fake":
        return
    if backend not in BACKENDS:
        raise ValueError(f"unknown model backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    allowed = {"openai": _OPENAI_KEYS, "embedded": _EMBEDDED_KEYS}.get(backend)
    if allowed is not None:
        _reject_unknown_keys(options, allowed, backend)
    check_integers(options, INTEGER_KEYS)
    check_numbers(options, NUMBER_BOUNDS)
    if backend == "embedded":
        _check_lora_adapter(options)


def _check_lora_adapter(options: dict[str, Any]) -> None:
    """`lora_adapter` is a path and runs on llama.cpp; whether the file is sound is checked when
    the model is built (reading it means hashing tens of MB)."""
    if "lora_adapter" not in options:
        return
    value = options["lora_adapter"]
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"lora_adapter must be a path (a PEFT folder or a kept adapter .json), got {value!r}"
        )
    if options.get("engine") == "transformers":
        raise ValueError(
            "lora_adapter runs on the llama.cpp engine, not engine: transformers "
            "(use backend: hf with adapter_path for transformers)"
        )


def make_chat_model(spec: dict[str, Any] | None = None) -> ChatModel:
    """Build a backend from a plain dict (as written in `configs/<profile>.yaml`).

    `{"backend": "openai", "model": ..., "base_url": ..., "api_key_env": ...}`,
    `{"backend": "embedded", "model_path": ... | "model_dir": ..., "n_ctx": ...}` (no path: the
    default GGUF via `resolve_default_gguf`; `"engine"` forces llama.cpp or batched transformers
    over the automatic choice of `engine.make_embedded_model`), or `{"backend": "hf", ...}` (keyword arguments of
    `hf.HFChatModel`; "model" is passed as `model_name_or_path`). An empty spec gives the
    default embedded model. With `"cache_path"` the model is wrapped in `CachedChatModel`.
    """
    options = dict(spec or {})
    check_integers(options, INTEGER_KEYS)
    backend = infer_backend(options)
    options.pop("backend", None)
    cache_path = options.pop("cache_path", None)
    if backend not in BACKENDS:
        raise ValueError(f"unknown model backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    model: ChatModel
    if backend == "openai":
        _reject_unknown_keys(options, _OPENAI_KEYS, backend)
        if not options.get("model"):
            raise ValueError("model spec for backend 'openai' needs a 'model' (e.g. gpt-4.1-mini)")
        model = OpenAIChatModel(**options)
    elif backend == "embedded":
        _reject_unknown_keys(options, _EMBEDDED_KEYS, backend)
        model_path = options.pop("model_path", None)
        if "model_file" in options:
            options.setdefault("filename", options.pop("model_file"))
        lookup = {
            key: options.pop(key) for key in ("filename", "repo_id", "revision", "sha256") if key in options
        }
        model_dir = options.pop("model_dir", None)
        if model_path is None:
            model_path = find_local_gguf(model_dir, lookup.get("filename", DEFAULT_GGUF_FILE))
        if model_path is None:  # found or downloaded when first called: a replay never needs the file
            model = DeferredEmbeddedModel(model_dir, lookup, options)
        else:
            model = make_embedded_model(model_path, **options)
    else:
        if "model" in options and "model_name_or_path" not in options:
            options["model_name_or_path"] = options.pop("model")
        model = HFChatModel(**options)
    if cache_path:
        model = CachedChatModel(
            model, ResponseCache(cache_path), backend=getattr(model, "cache_namespace", backend)
        )
    return model


def _reject_unknown_keys(options: dict[str, Any], allowed: frozenset[str], backend: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(
            f"model spec for backend {backend!r} has unknown key(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(sorted(allowed | {'backend', 'cache_path'}))}"
        )
