"""Fixtures and factories shared by several test files.

`make_episode` is the one hand-written episode the tests build (import it: `from conftest import
make_episode`); `tiny_path` the one tiny random model; the tiny training run is the library's own
`train.config.tiny_smoke_config`, which `train.gpu_check` runs too.
"""

import pytest

from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.eval.progress import StudyProgress
from supersede_lib.models import cpu_features, engine
from supersede_lib.models.gguf import MODEL_DIR_ENV


@pytest.fixture(autouse=True)
def _cpu_without_bf16_units(monkeypatch):
    """Tests see a CPU without bf16 matrix units and no GPU, whatever runs them: "auto" means llama.cpp.

    Engine-choice tests patch `read_cpuinfo` / `cuda_is_available` themselves."""
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: "")
    monkeypatch.setattr(engine, "cuda_is_available", lambda: False)
    monkeypatch.delenv(engine.ENGINE_ENV, raising=False)


@pytest.fixture
def empty_home(tmp_path, monkeypatch):
    """A fresh $HOME and no $SUPERSEDE_MODEL_DIR, so model-file lookups see only what a test puts there."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    return home


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny matmuls: 2 torch threads on busy shared cores are far slower than 1."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    """A tiny random Qwen2 (built offline in under a second) shared by a test module."""
    from supersede_lib.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny")


@pytest.fixture
def fake_unsloth(tiny_path, monkeypatch):
    """A stand-in `unsloth` module on a "CUDA" machine with bf16 (no GPU here): returns the tiny model and
    records what `FastLanguageModel.from_pretrained` / `get_peft_model` were asked, keyed by method."""
    import sys
    import types

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    calls: dict[str, dict] = {}

    class FakeFastLanguageModel:
        @staticmethod
        def from_pretrained(**kwargs):
            calls["from_pretrained"] = kwargs
            return AutoModelForCausalLM.from_pretrained(str(tiny_path)), AutoTokenizer.from_pretrained(
                str(tiny_path)
            )

        @staticmethod
        def get_peft_model(model, **kwargs):
            calls["get_peft_model"] = kwargs
            return model

    monkeypatch.setitem(
        sys.modules, "unsloth", types.SimpleNamespace(FastLanguageModel=FakeFastLanguageModel)
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    return calls


@pytest.fixture(scope="module")
def study_bars():
    """Every study bar (`results.outputs.study_progress`) opened while a test module runs, in order.

    Disabled bars count too, so studies run with `progress=False` can be checked."""
    from supersede_lib.results import outputs

    bars: list[StudyProgress] = []

    class RecordedProgress(StudyProgress):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            bars.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(outputs, "StudyProgress", RecordedProgress)
        yield bars


def make_episode(episode_id: str = "ep-0", n_sessions: int = 3, filler_session: int | None = None) -> Episode:
    """Session i says 'my city is city{i}' (except `filler_session`); gold is the last city."""
    sessions = []
    for index in range(n_sessions):
        text = f"[{episode_id}] SESSION-{index}-TEXT my city is city{index}"
        if index == filler_session:
            text = f"[{episode_id}] I like tea."
        sessions.append(
            Session(
                session_id=f"{episode_id}-s{index}",
                date=f"2023/05/0{index + 1} (Mon) 10:00",
                turns=(Turn("user", text), Turn("assistant", f"ASSISTANT-{index} noted")),
            )
        )
    last = max(index for index in range(n_sessions) if index != filler_session)
    return Episode(
        episode_id=episode_id,
        sessions=tuple(sessions),
        question="Which city do I live in now?",
        question_date="2023/06/01 (Thu) 10:00",
        gold_answers=(f"city{last}",),
        superseded_values=tuple(f"city{index}" for index in range(last) if index != filler_session),
        source="test",
        question_type="knowledge-update",
    )


def save_random_lora(base, folder, targets, rank=4, scale=0.05):
    """A PEFT LoRA on the model at `base` with random B matrices (a fresh LoRA is the identity),
    alpha = 2 x rank, saved to `folder`; returns the folder."""
    import peft
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    adapted = peft.get_peft_model(model, peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in adapted.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)
    adapted.save_pretrained(str(folder))
    return folder


# the small real models a CPU test can afford, in order of preference (provision-models.sh)
SMALL_MODEL_FILES = ("SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")


def small_model_file():
    """The first small GGUF on this machine (the library's lookup: SUPERSEDE_MODEL_DIR, then
    ~/.cache/supersede/models), or None."""
    from supersede_lib.models.gguf import find_local_gguf

    return next((path for name in SMALL_MODEL_FILES if (path := find_local_gguf(None, name))), None)


@pytest.fixture
def llama_server():
    """llama.cpp's own OpenAI-compatible HTTP server (the embedded engine's port) on a small
    provisioned model: yields (base_url, model_file); skips when xllamacpp or the model is missing."""
    pytest.importorskip("xllamacpp", reason="the embedded backend needs xllamacpp")
    from supersede_lib.models.gguf import EmbeddedGGUFModel, default_model_dir

    model_file = small_model_file()
    if model_file is None:
        pytest.skip(f"no {' or '.join(SMALL_MODEL_FILES)} in ${MODEL_DIR_ENV} or {default_model_dir()}")
    served = EmbeddedGGUFModel(model_file, n_ctx=4096, n_threads=1)
    try:
        yield served.serve(), model_file
    finally:
        served.close()
