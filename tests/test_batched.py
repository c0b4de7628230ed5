"""The batching transformers engine and the engine choice, on the tiny random Qwen2 (no bf16 hardware)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from supersede_lib.data.synthetic import generate_episodes  # noqa: E402
from supersede_lib.eval.runner import RunSettings, run_condition  # noqa: E402
from supersede_lib.models import cpu_features, engine  # noqa: E402
from supersede_lib.models.batched import BatchedHFChatModel  # noqa: E402
from supersede_lib.models.chat import ChatModel, ContextOverflowError, ModelCallError  # noqa: E402
from supersede_lib.models.gguf import EmbeddedGGUFModel  # noqa: E402
from supersede_lib.models.spec import make_chat_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

INTEL_AMX = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
INTEL_AVX512_BF16 = "flags\t: fpu avx2 avx512f avx512_bf16\n"
AMD_AVX2 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse avx2 fma sha_ni\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n"


def test_the_cpu_model_name_is_read_from_cpuinfo_text() -> None:
    """Run manifests name the CPU (`run_files.machine_facts`): the first `model name`, or none."""
    assert (
        cpu_features.cpu_model_name("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t: avx2\n") == "AMD EPYC"
    )
    assert cpu_features.cpu_model_name(ARM) == ""


def questions(count: int) -> list[list[dict[str, str]]]:
    """Chat prompts of different lengths (so batching has to pad)."""
    return [
        [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": f"I moved to city number {index}. " * (1 + 3 * index) + "Where now?"},
        ]
        for index in range(count)
    ]


def scrambled(model: BatchedHFChatModel) -> BatchedHFChatModel:
    """Larger random weights, so greedy replies depend on the prompt (the stock tiny model repeats one token)."""
    model.load()
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for parameter in model.model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return model


async def gather_chats(model: BatchedHFChatModel, prompts, limits) -> list:
    calls = [model.achat(prompt, max_tokens=limit) for prompt, limit in zip(prompts, limits, strict=True)]
    return await asyncio.gather(*calls, return_exceptions=True)


def test_concurrent_calls_share_one_generate(tiny_path: Path) -> None:
    model = BatchedHFChatModel(tiny_path, dtype="float32", max_batch_size=8, batch_window_s=0.2)
    assert isinstance(model, ChatModel) and not model.loaded  # loads on first use
    results = asyncio.run(gather_chats(model, questions(5), [6] * 5))
    assert model.generate_calls == 1 and model.batch_sizes == [5]
    assert all(result.completion_tokens == 6 and result.model == "tiny" for result in results)
    assert [result.prompt_tokens for result in results] == sorted(result.prompt_tokens for result in results)
    model.close()


def test_a_full_batch_runs_without_waiting_for_more(tiny_path: Path) -> None:
    model = BatchedHFChatModel(tiny_path, dtype="float32", max_batch_size=2, batch_window_s=0.2)
    asyncio.run(gather_chats(model, questions(5), [4] * 5))
    assert model.batch_sizes == [2, 2, 1]
    model.close()


def test_padding_and_mixed_limits_do_not_change_greedy_answers(tiny_path: Path) -> None:
    model = scrambled(BatchedHFChatModel(tiny_path, dtype="float32", batch_window_s=0.2))
    prompts, limits = questions(5), [3, 12, 7, 12, 9]
    batched = asyncio.run(gather_chats(model, prompts, limits))
    assert model.batch_sizes == [5]
    alone = [model.chat(prompt, max_tokens=limit) for prompt, limit in zip(prompts, limits, strict=True)]
    assert model.batch_sizes == [5, 1, 1, 1, 1, 1]
    assert len({result.text for result in alone}) > 1  # the replies depend on the prompt
    for together, single, limit in zip(batched, alone, limits, strict=True):
        assert (together.text, together.completion_tokens, together.prompt_tokens) == (
            single.text,
            single.completion_tokens,
            single.prompt_tokens,
        )
        assert together.completion_tokens <= limit
    model.close()


def test_a_prompt_longer_than_the_context_fails_alone(tiny_path: Path) -> None:
    model = BatchedHFChatModel(tiny_path, dtype="float32", n_ctx=100, batch_window_s=0.2)
    prompts = questions(4)  # 37, 79, 121 and 163 tokens
    results = asyncio.run(gather_chats(model, prompts, [4] * 4))
    for overflow in results[2:]:
        assert isinstance(overflow, ContextOverflowError) and "exceeds n_ctx=100" in str(overflow)
    assert [result.completion_tokens for result in results[:2]] == [4, 4]
    assert model.batch_sizes == [2]
    model.close()


def test_a_request_that_breaks_generate_fails_alone(tiny_path: Path, monkeypatch) -> None:
    model = BatchedHFChatModel(tiny_path, dtype="float32", batch_window_s=0.2)
    model.load()
    prompts = questions(4)
    poison = len(model.tokenizer.apply_chat_template(prompts[2], add_generation_prompt=True)["input_ids"])
    real_generate = model.model.generate

    def fragile_generate(**kwargs):
        mask = kwargs["attention_mask"]
        if (mask.sum(dim=1) == poison).any():
            raise RuntimeError("boom")
        return real_generate(**kwargs)

    monkeypatch.setattr(model.model, "generate", fragile_generate)
    results = asyncio.run(gather_chats(model, prompts, [4] * 4))
    assert isinstance(results[2], ModelCallError) and "boom" in str(results[2])
    assert [result.completion_tokens for index, result in enumerate(results) if index != 2] == [4, 4, 4]
    assert model.batch_sizes == [1, 1, 1]  # the failed batch of 4 was retried one by one
    model.close()


def test_the_runner_keeps_batches_full(tiny_path: Path) -> None:
    model = BatchedHFChatModel(tiny_path, dtype="float32", max_batch_size=3, batch_window_s=0.2)
    episodes = generate_episodes(3, seed=0, difficulty="easy")
    settings = RunSettings(concurrency=3, max_tokens_notes=8, max_tokens_answer=4)
    frame = run_condition(episodes, "bounded_memory", model, settings, progress=False).frame
    assert frame["error"].isna().all() and int(frame["n_calls"].sum()) == sum(model.batch_sizes)
    assert max(model.batch_sizes) == 3 and model.generate_calls < int(frame["n_calls"].sum())
    model.close()


@pytest.mark.parametrize(
    ("cpuinfo", "cuda", "expected"),
    [
        (INTEL_AMX, False, ("transformers", "bfloat16", "cpu")),
        (INTEL_AVX512_BF16, False, ("llamacpp", "gguf", "cpu")),  # measured: batched bf16 is not faster there
        (AMD_AVX2, False, ("llamacpp", "gguf", "cpu")),
        (ARM, False, ("llamacpp", "gguf", "cpu")),
        ("", False, ("llamacpp", "gguf", "cpu")),
        (AMD_AVX2, True, ("transformers", "bfloat16", "cuda")),
    ],
)
def test_engine_choice_from_cpu_flags(cpuinfo: str, cuda: bool, expected: tuple[str, str, str]) -> None:
    choice = engine.choose_engine("auto", cpuinfo_text=cpuinfo, cuda_available=cuda, threads=2)
    assert (choice.engine, choice.dtype, choice.device) == expected
    assert choice.threads == 2 and "why:" in choice.describe() and choice.reason


def test_engine_choice_names_the_flags_it_found_and_can_be_forced() -> None:
    assert cpu_features.bf16_matrix_flags(INTEL_AMX) == ["amx_bf16"]
    assert cpu_features.bf16_native_flags(INTEL_AMX) == ["amx_bf16", "avx512_bf16"]
    assert cpu_features.bf16_native_flags(INTEL_AVX512_BF16) == ["avx512_bf16"]
    vector_only = engine.choose_engine("transformers", cpuinfo_text=INTEL_AVX512_BF16)
    assert vector_only.dtype == "bfloat16"  # forced there, it still computes bf16 natively
    assert "no bf16 matrix units" in engine.choose_engine(cpuinfo_text=INTEL_AVX512_BF16).reason
    assert "amx_bf16" in engine.choose_engine(cpuinfo_text=INTEL_AMX).reason
    forced = engine.choose_engine("llamacpp", cpuinfo_text=INTEL_AMX)
    assert forced.engine == "llamacpp" and "forced" in forced.reason
    fp32 = engine.choose_engine("transformers", cpuinfo_text=AMD_AVX2)
    assert (fp32.engine, fp32.dtype) == ("transformers", "float32")  # bf16 would be emulated there
    with pytest.raises(ValueError, match="auto, llamacpp, transformers"):
        engine.choose_engine("vllm")


def test_the_model_spec_picks_or_forces_the_engine(tmp_path: Path, monkeypatch, capsys) -> None:
    model_file = tmp_path / "small.gguf"
    model_file.write_bytes(b"x")
    spec = {"backend": "embedded", "model_path": str(model_file), "n_ctx": 2048, "n_threads": 2}
    monkeypatch.setattr(engine, "cuda_is_available", lambda: False)
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: INTEL_AMX)
    auto = make_chat_model(spec)
    assert isinstance(auto, BatchedHFChatModel) and not auto.loaded
    assert (auto.name, auto.dtype, auto.n_ctx, auto.n_threads) == ("small", "bfloat16", 2048, 2)
    assert auto.cache_namespace == "transformers-bfloat16"
    assert "engine: transformers (dtype bfloat16, device cpu, threads 2)" in capsys.readouterr().out
    forced = make_chat_model({**spec, "engine": "llamacpp"})
    assert isinstance(forced, EmbeddedGGUFModel) and forced.n_ctx == 2048
    assert "forced by the model spec" in capsys.readouterr().out
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: AMD_AVX2)
    assert isinstance(make_chat_model(spec), EmbeddedGGUFModel)
    batched = make_chat_model({**spec, "engine": "transformers", "max_batch_size": 4})
    assert (
        isinstance(batched, BatchedHFChatModel) and batched.dtype == "float32" and batched.max_batch_size == 4
    )
    with pytest.raises(ValueError, match="unknown engine"):
        make_chat_model({**spec, "engine": "vllm"})


def test_the_engine_environment_variable_decides_what_auto_means(monkeypatch) -> None:
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: INTEL_AMX)
    assert engine.detect_engine("auto").engine == "transformers"
    monkeypatch.setenv(engine.ENGINE_ENV, "llamacpp")
    assert engine.detect_engine("auto").engine == "llamacpp"
    assert engine.detect_engine("transformers").engine == "transformers"  # a spec's own choice wins


def test_an_adapter_is_merged_into_the_batched_engines_weights_and_named(
    tiny_path: Path, tmp_path: Path
) -> None:
    """A trained policy judged on the batched engine: the weights are the merged ones HFChatModel uses,
    and the adapter's hash is in the name, so its replies never share the base's cache entries."""
    from conftest import save_random_lora

    from supersede_lib.models.hf import HFChatModel, adapter_file_fingerprint

    adapter = save_random_lora(tiny_path, tmp_path / "adapter", ["q_proj", "v_proj"])
    batched = BatchedHFChatModel(tiny_path, dtype="float32", adapter_path=adapter)
    batched.load()
    merged = HFChatModel(str(tiny_path), adapter_path=str(adapter), device="cpu", merge_adapter=True)
    base = BatchedHFChatModel(tiny_path, dtype="float32")
    base.load()
    merged_weights, batched_weights = merged.model.state_dict(), batched.model.state_dict()
    assert set(batched_weights) == set(merged_weights)
    assert all(torch.equal(batched_weights[key], merged_weights[key]) for key in merged_weights)
    assert any(not torch.equal(batched_weights[key], base.model.state_dict()[key]) for key in batched_weights)
    assert batched.name.endswith(f"+adapter@{adapter_file_fingerprint(adapter)[:12]}")
    assert base.name != batched.name
