"""The embedded llama.cpp backend without loading a model: reply parsing, lazy loading, thread
settings, and finding (or downloading) the GGUF file. No network."""

import asyncio
import hashlib

import pytest

from supersede_lib.models.chat import ContextOverflowError, ModelCallError, ModelConfigError
from supersede_lib.models.gguf import (
    DEFAULT_GGUF_FILE,
    DEFAULT_GGUF_REPO,
    MODEL_DIR_ENV,
    THREADS_ENV,
    EmbeddedGGUFModel,
    chat_result_from_llamacpp,
    resolve_default_gguf,
)
from supersede_lib.models.spec import check_model_spec

MESSAGES = [{"role": "user", "content": "hello"}]


def test_embedded_reply_parsing_reads_text_and_usage():
    response = {
        "choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
    }
    result = chat_result_from_llamacpp(response, model="tiny", latency_s=0.5)
    assert (result.text, result.prompt_tokens, result.completion_tokens, result.model) == (
        "hello",
        12,
        3,
        "tiny",
    )


def test_embedded_error_dicts_become_clear_errors():
    overflow = {
        "error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 900, "n_ctx": 512}
    }
    with pytest.raises(ContextOverflowError, match="900 tokens exceeds n_ctx=512"):
        chat_result_from_llamacpp(overflow, model="tiny", latency_s=0)
    with pytest.raises(ModelCallError, match="server_error"):
        chat_result_from_llamacpp(
            {"code": 500, "type": "server_error", "message": "bad"}, model="tiny", latency_s=0
        )
    with pytest.raises(ModelCallError, match="no choices"):
        chat_result_from_llamacpp({"choices": []}, model="tiny", latency_s=0)


def test_embedded_model_checks_the_file_but_loads_lazily(tmp_path):
    with pytest.raises(ModelConfigError, match="not found"):
        EmbeddedGGUFModel(tmp_path / "missing.gguf")
    model_file = tmp_path / "tiny.gguf"
    model_file.write_bytes(b"not really a model")
    model = EmbeddedGGUFModel(model_file, n_ctx=1024, default_max_tokens=33)
    assert model.name == "tiny" and not model.loaded
    body = model.request_body(MESSAGES, None, 0.0, 5)
    assert body["max_tokens"] == 33 and body["seed"] == 5 and body["temperature"] == 0.0


def test_embedded_threads_come_from_the_spec_then_the_environment(tmp_path, monkeypatch):
    model_file = tmp_path / "tiny.gguf"
    model_file.write_bytes(b"not really a model")
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert EmbeddedGGUFModel(model_file).n_threads is None  # llama.cpp's own choice
    monkeypatch.setenv(THREADS_ENV, "1")
    assert EmbeddedGGUFModel(model_file).n_threads == 1
    assert EmbeddedGGUFModel(model_file, n_threads=3).n_threads == 3
    monkeypatch.setenv(THREADS_ENV, "two")
    with pytest.raises(ModelConfigError, match="SUPERSEDE_N_THREADS.*'two'"):
        EmbeddedGGUFModel(model_file)


def test_parallel_slots_keep_their_replies_apart_from_one_slot_replies(tmp_path):
    model_file = tmp_path / "tiny.gguf"
    model_file.write_bytes(b"not really a model")
    assert EmbeddedGGUFModel(model_file).cache_namespace == "embedded"
    assert EmbeddedGGUFModel(model_file, n_parallel=4).cache_namespace == "embedded-slots"
    assert EmbeddedGGUFModel(model_file).missing_capabilities(frozenset({"tools", "embeddings"})) == {}
    assert (
        "turned off"
        in EmbeddedGGUFModel(model_file, embeddings=False).missing_capabilities(frozenset({"embeddings"}))[
            "embeddings"
        ]
    )
    assert set(
        EmbeddedGGUFModel(model_file, n_parallel=4).missing_capabilities(frozenset({"embeddings"}))
    ) == {"embeddings"}
    with pytest.raises(ModelConfigError, match="n_parallel must be at least 1"):
        EmbeddedGGUFModel(model_file, n_parallel=0)


def test_embedded_model_with_a_broken_file_raises_config_error(tmp_path):
    pytest.importorskip("xllamacpp")
    model_file = tmp_path / "broken.gguf"
    model_file.write_bytes(b"GGUF but truncated")
    with pytest.raises(ModelConfigError, match="could not load"):
        asyncio.run(EmbeddedGGUFModel(model_file, n_ctx=256).achat(MESSAGES))


def _refuse_download(**kwargs):
    raise AssertionError(f"unexpected download {kwargs}")


def test_resolve_prefers_explicit_file_then_dir_then_env_then_home(tmp_path, empty_home, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _refuse_download)
    name = DEFAULT_GGUF_FILE
    home_file = empty_home / ".cache" / "supersede" / "models" / name
    home_file.parent.mkdir(parents=True)
    home_file.write_bytes(b"home")
    assert resolve_default_gguf() == home_file

    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / name).write_bytes(b"env")
    monkeypatch.setenv(MODEL_DIR_ENV, str(env_dir))
    assert resolve_default_gguf() == env_dir / name

    explicit_dir = tmp_path / "explicit"
    explicit_dir.mkdir()
    (explicit_dir / name).write_bytes(b"explicit")
    assert resolve_default_gguf(explicit_dir) == explicit_dir / name

    other = tmp_path / "other.gguf"
    other.write_bytes(b"x")
    assert resolve_default_gguf(other) == other
    with pytest.raises(ModelConfigError, match="not found"):
        resolve_default_gguf(tmp_path / "absent.gguf")


class FakeHub:
    """huggingface_hub's metadata and download, offline: `content` is what the download writes,
    `published` what the hub's metadata says the file is (size, LFS SHA-256, commit)."""

    COMMIT = "0123456789abcdef0123456789abcdef01234567"

    def __init__(self, monkeypatch, content: bytes, published: bytes | None = None) -> None:
        import huggingface_hub

        self.content = content
        self.published = content if published is None else published
        self.downloads: list[tuple] = []
        self.asked_revisions: list = []
        monkeypatch.setattr(huggingface_hub, "hf_hub_url", self.url)
        monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", self.metadata)
        monkeypatch.setattr(huggingface_hub, "hf_hub_download", self.download)

    def url(self, repo_id, filename, *, revision=None):
        self.asked_revisions.append(revision)
        return f"https://hub.invalid/{repo_id}/resolve/{revision or 'main'}/{filename}"

    def metadata(self, url):
        import huggingface_hub

        sha = hashlib.sha256(self.published).hexdigest()
        return huggingface_hub.HfFileMetadata(
            commit_hash=self.COMMIT,
            etag=f'"{sha}"',
            location=url,
            size=len(self.published),
            xet_file_data=None,
        )

    def download(self, repo_id, filename, revision, local_dir):
        self.downloads.append((repo_id, filename, revision, local_dir))
        target = local_dir / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.content)
        return str(target)


def test_resolve_downloads_into_the_model_dir_pinned_to_a_commit_when_nothing_is_local(
    tmp_path, empty_home, monkeypatch
):
    hub = FakeHub(monkeypatch, b"downloaded")
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / "models"))
    path = resolve_default_gguf()
    assert path == tmp_path / "models" / DEFAULT_GGUF_FILE and path.read_bytes() == b"downloaded"
    # the file is fetched at the exact commit the metadata (size, SHA-256) was read for
    assert hub.downloads == [(DEFAULT_GGUF_REPO, DEFAULT_GGUF_FILE, FakeHub.COMMIT, tmp_path / "models")]
    assert resolve_default_gguf() == path and len(hub.downloads) == 1  # found locally the second time
    resolve_default_gguf(filename="other.gguf", revision="v1.0")
    assert hub.asked_revisions[-1] == "v1.0"


def test_a_download_that_is_not_the_published_file_is_moved_aside_and_named(
    tmp_path, empty_home, monkeypatch
):
    FakeHub(monkeypatch, b"truncated", published=b"the whole published model")
    with pytest.raises(ModelConfigError, match="not the published file") as raised:
        resolve_default_gguf(tmp_path)
    assert "expected 25" in str(raised.value) and FakeHub.COMMIT in str(raised.value)
    assert (
        not (tmp_path / DEFAULT_GGUF_FILE).exists() and (tmp_path / f"{DEFAULT_GGUF_FILE}.mismatch").exists()
    )

    FakeHub(monkeypatch, b"same size!", published=b"SAME SIZE!")  # right size, wrong bytes
    with pytest.raises(ModelConfigError, match="SHA-256"):
        resolve_default_gguf(tmp_path / "second")


def test_a_spec_pins_revision_and_sha256(tmp_path, empty_home, monkeypatch):
    hub = FakeHub(monkeypatch, b"model bytes")
    expected = hashlib.sha256(b"model bytes").hexdigest()
    wrong = hashlib.sha256(b"another file").hexdigest()
    assert resolve_default_gguf(tmp_path, revision="abc", sha256=expected).read_bytes() == b"model bytes"
    assert hub.asked_revisions == ["abc"]
    with pytest.raises(ModelConfigError, match=wrong):
        resolve_default_gguf(tmp_path / "again", sha256=wrong)  # the spec's hash wins over upstream's
    check_model_spec({"backend": "embedded", "model_file": "m.gguf", "revision": "abc", "sha256": expected})


def test_resolve_failure_says_what_to_set(empty_home, monkeypatch):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", offline)
    with pytest.raises(ModelConfigError, match=MODEL_DIR_ENV) as raised:
        resolve_default_gguf()
    assert "no network" in str(raised.value) and "\n" not in str(raised.value)
