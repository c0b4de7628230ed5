"""A PEFT LoRA adapter converted to a llama.cpp GGUF adapter: metadata, tensor names and layout,
refusals that name the file, the model spec key, and (on the real SmolLM2, a llama model whose q/k
rows llama.cpp reorders) the adapted model's log-probabilities against transformers'."""

from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest
from conftest import save_random_lora

from supersede_lib.models import lora_gguf
from supersede_lib.models.chat import ModelConfigError
from supersede_lib.models.engine import DeferredEmbeddedModel, engine_for_adapter
from supersede_lib.models.lora_gguf import (
    BaseGeometry,
    convert_lora_adapter,
    gguf_lora_tensors,
    lora_alpha_for_llamacpp,
    read_lora_adapter,
    write_lora_gguf,
)
from supersede_lib.models.spec import check_model_spec, make_chat_model

gguf = pytest.importorskip("gguf")

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LORA_CONFIG = {"peft_type": "LORA", "r": 2, "lora_alpha": 4, "use_rslora": False, "rank_pattern": {}}
# a llama model of 2 blocks, 4 query heads of 4 dims and 2 key/value heads
GEOMETRY = BaseGeometry(
    arch="llama",
    n_blocks=2,
    n_head=4,
    n_head_kv=2,
    tensor_names=frozenset(
        f"blk.{block}.{part}.weight"
        for block in range(2)
        for part in ("attn_q", "attn_k", "attn_v", "ffn_up")
    ),
)


def _peft_tensors(rank: int = 2) -> dict[str, numpy.ndarray]:
    """PEFT-named LoRA matrices for q (16 rows), k and v (8 rows each) of block 0, hidden size 16."""
    rows = {"q_proj": 16, "k_proj": 8, "v_proj": 8}
    tensors = {}
    for module, out in rows.items():
        prefix = f"base_model.model.model.layers.0.self_attn.{module}"
        tensors[f"{prefix}.lora_A.weight"] = numpy.full((rank, 16), 0.5, dtype=numpy.float32)
        tensors[f"{prefix}.lora_B.weight"] = numpy.arange(out * rank, dtype=numpy.float32).reshape(out, rank)
    return tensors


def _write_peft_folder(folder: Path, config: dict | None = None) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    save_file(_peft_tensors(), str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps(config or LORA_CONFIG))
    return folder


def test_the_adapter_file_has_llamacpps_metadata_names_and_shapes(tmp_path: Path) -> None:
    tensors = gguf_lora_tensors(_peft_tensors(), GEOMETRY)
    path = tmp_path / "adapter.gguf"
    write_lora_gguf(path, "llama", 4.0, tensors)
    reader = gguf.GGUFReader(str(path))
    assert reader.get_field("general.type").contents() == "adapter"
    assert reader.get_field("general.architecture").contents() == "llama"
    assert reader.get_field("adapter.type").contents() == "lora"
    assert reader.get_field("adapter.lora.alpha").contents() == pytest.approx(4.0)
    shapes = {tensor.name: (list(tensor.shape), tensor.tensor_type) for tensor in reader.tensors}
    f32 = gguf.GGMLQuantizationType.F32
    # ggml order (columns first): lora_a is in x rank, lora_b is rank x out
    assert shapes["blk.0.attn_q.weight.lora_a"] == ([16, 2], f32)
    assert shapes["blk.0.attn_q.weight.lora_b"] == ([2, 16], f32)
    assert shapes["blk.0.attn_k.weight.lora_b"] == ([2, 8], f32)
    assert len(shapes) == 6


def test_q_and_k_rows_are_reordered_per_head_for_llama_and_v_is_not() -> None:
    converted = dict(gguf_lora_tensors(_peft_tensors(), GEOMETRY))
    q_rows = converted["blk.0.attn_q.weight.lora_b"][:, 0] / 2  # row index of the PEFT matrix
    # head 0 holds rows 0-3: rotary halves (0,1) and (2,3) interleave to 0,2,1,3
    assert q_rows[:8].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    k_rows = converted["blk.0.attn_k.weight.lora_b"][:, 0] / 2  # 2 key heads of 4 rows
    assert k_rows.tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    v_rows = converted["blk.0.attn_v.weight.lora_b"][:, 0] / 2
    assert v_rows.tolist() == list(range(8))
    qwen = BaseGeometry("qwen2", 2, 4, 2, GEOMETRY.tensor_names)
    unchanged = dict(gguf_lora_tensors(_peft_tensors(), qwen))["blk.0.attn_q.weight.lora_b"][:, 0] / 2
    assert unchanged.tolist() == list(range(16))


def test_conversion_refuses_what_llamacpp_cannot_apply() -> None:
    with pytest.raises(ModelConfigError, match="not 'gpt2'"):
        gguf_lora_tensors(_peft_tensors(), BaseGeometry("gpt2", 2, 4, 2, GEOMETRY.tensor_names))
    lacking = BaseGeometry("llama", 2, 4, 2, frozenset({"blk.0.attn_q.weight", "blk.0.attn_k.weight"}))
    with pytest.raises(ModelConfigError, match="blk.0.attn_v.weight, which the llama base lacks"):
        gguf_lora_tensors(_peft_tensors(), lacking)
    with pytest.raises(ModelConfigError, match="not a LoRA A or B matrix"):
        gguf_lora_tensors({"base_model.model.lm_head.weight": numpy.zeros((2, 2))}, GEOMETRY)
    with pytest.raises(ModelConfigError, match="use_dora"):
        lora_alpha_for_llamacpp({**LORA_CONFIG, "use_dora": True})
    assert lora_alpha_for_llamacpp({**LORA_CONFIG, "use_rslora": True, "r": 16}) == pytest.approx(16.0)


def test_an_adapter_is_read_from_a_folder_or_a_kept_record_and_damage_names_the_file(tmp_path: Path) -> None:
    folder = _write_peft_folder(tmp_path / "checkpoint-10")
    adapter = read_lora_adapter(folder)
    assert adapter.label == "checkpoint-10" and len(adapter.sha256) == 64
    record = tmp_path / "kept" / "run.json"
    record.parent.mkdir()
    weights = record.with_suffix(".safetensors")
    weights.write_bytes((folder / "adapter_model.safetensors").read_bytes())
    record_body = {"weights_file": weights.name, "sha256": adapter.sha256, "peft_config": LORA_CONFIG}
    record.write_text(json.dumps(record_body))
    assert read_lora_adapter(record).sha256 == adapter.sha256
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(ModelConfigError, match=f"{record}.*changed or damaged"):
        read_lora_adapter(record)
    (folder / "adapter_model.safetensors").unlink()
    with pytest.raises(ModelConfigError, match=f"{folder}: adapter_model.safetensors is missing"):
        read_lora_adapter(folder)
    with pytest.raises(ModelConfigError, match=f"LoRA adapter {tmp_path / 'nowhere'} not found"):
        read_lora_adapter(tmp_path / "nowhere")


def test_the_spec_takes_lora_adapter_and_the_name_carries_its_hash(tmp_path: Path) -> None:
    folder = _write_peft_folder(tmp_path / "checkpoint-10")
    check_model_spec({"backend": "embedded", "engine": "llamacpp", "lora_adapter": str(folder)})
    with pytest.raises(ValueError, match="lora_adapter must be a path"):
        check_model_spec({"backend": "embedded", "lora_adapter": 3})
    with pytest.raises(ValueError, match="not engine: transformers"):
        check_model_spec({"backend": "embedded", "engine": "transformers", "lora_adapter": str(folder)})
    with pytest.raises(ModelConfigError, match="runs on the llama.cpp engine"):
        engine_for_adapter("transformers", folder)
    assert engine_for_adapter("auto", folder) == "llamacpp"
    model_file = tmp_path / "base.gguf"
    model_file.write_bytes(b"GGUF")  # the model loads on first call: its name is all that is asked here
    sha = read_lora_adapter(folder).short_sha
    model = make_chat_model(
        {"backend": "embedded", "model_path": str(model_file), "lora_adapter": str(folder)}
    )
    assert model.name == f"base+checkpoint-10@{sha}"
    deferred = DeferredEmbeddedModel(None, {"filename": "x.gguf"}, {"lora_adapter": str(folder)})
    assert deferred.name == f"x+checkpoint-10@{sha}" and deferred.cache_namespace == "embedded"
    with pytest.raises(ModelConfigError, match=f"LoRA adapter {tmp_path / 'gone'} not found"):
        make_chat_model(
            {"backend": "embedded", "model_path": str(model_file), "lora_adapter": str(tmp_path / "gone")}
        )


def _smollm2() -> Path:
    from supersede_lib.models.gguf import default_model_dir, find_local_gguf

    found = find_local_gguf(None, SMOLLM2_FILE)
    if found is None:
        pytest.skip(f"no {SMOLLM2_FILE} in $SUPERSEDE_MODEL_DIR or {default_model_dir()}")
    return found


def _greedy_with_logprobs(
    model_file: Path, adapter: Path, prompts: list[list[int]]
) -> list[tuple[list[int], list]]:
    """llama.cpp's 8 greedy tokens after each prompt (token ids), each with its log-probability."""
    from supersede_lib.models.gguf import EmbeddedGGUFModel

    engine = EmbeddedGGUFModel(model_file, n_ctx=512, n_threads=1, lora_adapter=adapter)
    engine.load()
    replies = [
        engine._server.handle_completions({"prompt": ids, "n_predict": 8, "n_probs": 1, "temperature": 0})
        for ids in prompts
    ]
    engine.close()
    return [
        (ids, reply["choices"][0]["logprobs"]["content"]) for ids, reply in zip(prompts, replies, strict=True)
    ]


def _logprob_gap(reference: object, generated: list[tuple[list[int], list]]) -> float:
    """Mean |log p| difference between llama.cpp's greedy tokens and transformers' (teacher-forced)."""
    import torch

    gaps = []
    for ids, content in generated:
        tokens = [entry["id"] for entry in content]
        with torch.no_grad():
            logprobs = torch.log_softmax(reference(torch.tensor([ids + tokens])).logits[0], -1)
        gaps += [
            abs(entry["logprob"] - float(logprobs[len(ids) - 1 + index, entry["id"]]))
            for index, entry in enumerate(content)
        ]
    return sum(gaps) / len(gaps)


def test_a_converted_lora_on_smollm2_matches_transformers_and_the_row_order_matters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_torch_thread: None
) -> None:
    pytest.importorskip("xllamacpp")
    pytest.importorskip("peft")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from supersede_lib.models.hf import materialize_gguf

    model_file = _smollm2()
    base = materialize_gguf(model_file.parent, model_file.name)
    # rank 8 on q and k only: it moves attention, where a q/k row-order slip shows
    adapter = save_random_lora(base, tmp_path / "adapter", ["q_proj", "k_proj"], rank=8, scale=0.1)
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    texts = [
        "The quick brown fox jumps over the lazy dog. Paris is the capital of",
        "def fibonacci(n):\n    ",
    ]
    prompts = [tokenizer(text)["input_ids"] for text in texts]
    monkeypatch.setenv(lora_gguf.LORA_CACHE_ENV, str(tmp_path / "converted"))
    assert convert_lora_adapter(adapter, model_file).parent == tmp_path / "converted"
    reference = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(str(base)), str(adapter)
    ).eval()
    matched = _logprob_gap(reference, _greedy_with_logprobs(model_file, adapter, prompts))
    # measured: 0.04 (the base alone differs by 0.06: quantised activations); 0.16 without the reorder
    assert matched < 0.1
    monkeypatch.setattr(lora_gguf, "QK_REORDERED_ARCHS", frozenset())
    monkeypatch.setenv(lora_gguf.LORA_CACHE_ENV, str(tmp_path / "unordered"))
    assert _logprob_gap(reference, _greedy_with_logprobs(model_file, adapter, prompts)) > matched + 0.05


def test_the_agreement_bench_asks_real_bounded_memory_prompts_and_counts_identical_replies() -> None:
    from supersede_lib.bench.adapters import identical_share, reference_calls
    from supersede_lib.models.chat import ChatResult

    class Scripted:
        def chat(self, messages: list, *, max_tokens: int, temperature: float) -> ChatResult:
            return ChatResult(text=f"notes {len(messages)}", latency_s=0.5, model="scripted")

    calls = reference_calls(Scripted(), 5)
    assert len(calls) == 5
    (first_messages, first_limit), reply, seconds = calls[0]
    assert first_messages[0]["role"] == "system" and first_limit > 0
    assert reply.startswith("notes") and seconds == 0.5
    assert identical_share(["a", "b ", "c"], ["a", "b", "d"]) == pytest.approx(2 / 3)
