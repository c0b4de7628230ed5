"""HFChatModel: a local transformers model (+ LoRA adapter) behind the ChatModel protocol."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from supersede_lib.models.chat import ChatModel  # noqa: E402
from supersede_lib.models.hf import (  # noqa: E402
    HFChatModel,
    adapter_file_fingerprint,
    contiguous_lm_head_input,
    materialize_gguf,
    split_gguf_path,
)
from supersede_lib.models.tiny import build_tiny_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "My notes:\n- lives in Lisbon\n\nQuestion: Where do I live now?"},
]


@pytest.fixture(scope="module")
def adapter_path(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(tiny_path)
    # init_lora_weights=False: random A and B, so the adapter really changes the outputs.
    peft_model = get_peft_model(
        base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    folder = tmp_path_factory.mktemp("hf") / "adapter"
    peft_model.save_pretrained(folder)
    return folder


def test_tiny_model_is_a_chatml_qwen2_with_left_padding(tiny_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_path)
    assert AutoConfig.from_pretrained(tiny_path).model_type == "qwen2"
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.padding_side) == (
        "<|im_end|>",
        "<|endoftext|>",
        "left",
    )
    assert 512 <= len(tokenizer) <= 1000
    rendered = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert rendered.startswith("<|im_start|>system\nAnswer briefly.<|im_end|>")
    assert rendered.endswith("<|im_start|>assistant\n")
    assert build_tiny_model(tiny_path) == tiny_path  # idempotent


def test_hf_chat_model_answers_greedily_through_the_chat_template(tiny_path: Path) -> None:
    model = HFChatModel(str(tiny_path), device="cpu", max_new_tokens_default=8)
    assert isinstance(model, ChatModel)
    first = asyncio.run(model.achat(MESSAGES))
    prompt = model.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, return_dict=True)[
        "input_ids"
    ]
    assert first.prompt_tokens == len(prompt)
    assert 0 < first.completion_tokens <= 8
    assert first.model == model.name == "tiny" and not first.cached and first.latency_s > 0

    async def three_at_once():
        return await asyncio.gather(*(model.achat(MESSAGES) for _ in range(3)))

    assert {result.text for result in asyncio.run(three_at_once())} == {first.text}  # temperature 0 is greedy
    assert model.chat(MESSAGES, max_tokens=3).completion_tokens <= 3


def test_base_and_trained_model_differ_only_by_the_adapter(
    tiny_path: Path, adapter_path: Path, tmp_path: Path
) -> None:
    base = HFChatModel(str(tiny_path), device="cpu")
    adapted = HFChatModel(str(tiny_path), adapter_path=str(adapter_path), device="cpu")
    assert base.adapter_fingerprint is None
    assert adapted.adapter_fingerprint == adapter_file_fingerprint(adapter_path)
    assert adapted.name == f"tiny+adapter@{adapted.adapter_fingerprint[:12]}"
    assert base.base_fingerprint() == adapted.base_fingerprint()
    assert base.differs_only_by_adapter(adapted) and adapted.differs_only_by_adapter(base)
    assert not base.differs_only_by_adapter(
        HFChatModel(str(tiny_path), device="cpu")
    )  # no adapter either side

    encoded = base.tokenizer.apply_chat_template(
        MESSAGES, add_generation_prompt=True, return_dict=True, return_tensors="pt"
    )
    with torch.no_grad():
        base_logits = base.model(**encoded).logits
        adapted_logits = adapted.model(**encoded).logits
    assert not torch.allclose(base_logits, adapted_logits)  # the adapter is really applied
    # the adapter computes in the base weights' dtype (PEFT would load it fp32 beside a bf16 base)
    assert {p.dtype for p in adapted.model.parameters()} == {next(base.model.parameters()).dtype}
    merged = HFChatModel(str(tiny_path), adapter_path=str(adapter_path), device="cpu", merge_adapter=True)
    assert merged.base_fingerprint() == base.base_fingerprint()  # taken before merging
    assert not any("lora_" in name for name, _ in merged.model.named_parameters())
    with torch.no_grad():
        merged_logits = merged.model(**encoded).logits
    assert torch.allclose(merged_logits, adapted_logits, atol=1e-2 * float(adapted_logits.abs().max()))
    bf16_adapted = HFChatModel(
        str(tiny_path), adapter_path=str(adapter_path), device="cpu", dtype=torch.bfloat16
    )
    assert {p.dtype for p in bf16_adapted.model.parameters()} == {torch.bfloat16}

    other_base = HFChatModel(str(build_tiny_model(tmp_path / "other", seed=7)), device="cpu")
    assert other_base.base_fingerprint() != base.base_fingerprint()
    assert not other_base.differs_only_by_adapter(adapted)


def test_the_output_layer_reads_a_contiguous_input_and_answers_the_same(tiny_path: Path) -> None:
    """The pre-hook only lays the last positions out contiguously: greedy tokens under autocast are unchanged."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.bfloat16).eval()
    prompt = torch.tensor([[5, 17, 42, 9, 11, 3], [8, 8, 21, 30, 2, 7]])

    def greedy() -> torch.Tensor:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            return model.generate(
                input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=5, do_sample=False
            )

    before = greedy()
    seen: list[bool] = []
    contiguous_lm_head_input(model)
    model.get_output_embeddings().register_forward_pre_hook(
        lambda module, args: seen.append(args[0].is_contiguous())
    )
    assert torch.equal(greedy(), before)
    assert seen and all(seen)


def test_bad_paths_raise_clear_errors(tiny_path: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="adapter_path"):
        HFChatModel(str(tiny_path), adapter_path=str(tmp_path / "nope"), device="cpu")
    with pytest.raises(FileNotFoundError, match="missing.gguf"):
        materialize_gguf(tmp_path, "missing.gguf", cache_dir=tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="adapter weights"):
        adapter_file_fingerprint(tmp_path)


def test_split_gguf_path() -> None:
    assert split_gguf_path("/models/x.Q4.gguf") == ("/models", "x.Q4.gguf")
    assert split_gguf_path("Qwen/Qwen2.5-3B-Instruct") == ("Qwen/Qwen2.5-3B-Instruct", None)
    assert split_gguf_path("/models", "y.gguf") == ("/models", "y.gguf")


@pytest.mark.slow
@pytest.mark.realmodel
def test_a_gguf_file_loads_and_answers(tmp_path: Path) -> None:
    from supersede_lib.train.config import model_dir

    path = model_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        pytest.skip(f"{path} not provisioned")
    model = HFChatModel(str(path), device="cpu", max_new_tokens_default=16)
    assert model.tokenizer.eos_token == "<|im_end|>" and model.tokenizer.padding_side == "left"
    result = model.chat([{"role": "user", "content": "Notes: lives in Austin. Where does the user live?"}])
    assert result.text and result.completion_tokens <= 16


def test_release_model_frees_in_process_weights_and_leaves_api_clients_alone(
    tiny_path: Path, tmp_path: Path
) -> None:
    from supersede_lib.models.cache import CachedChatModel, ResponseCache
    from supersede_lib.models.chat import release_model
    from supersede_lib.models.openai_api import OpenAIChatModel

    hf = HFChatModel(str(tiny_path), device="cpu")
    release_model(CachedChatModel(hf, ResponseCache(tmp_path / "responses.sqlite")))
    assert not hasattr(hf, "model")  # weights dropped through the cache wrapper

    client = OpenAIChatModel("served-model", base_url="http://127.0.0.1:9/v1")  # a local server needs no key
    release_model(client)
    assert client.model == "served-model"  # a served model name, not weights: untouched


def test_prompt_prefix_cache_reuses_the_shared_prefix_and_matches_a_whole_prefill(tiny_path: Path) -> None:
    plain = HFChatModel(str(tiny_path), device="cpu", max_new_tokens_default=8)
    reusing = HFChatModel(str(tiny_path), device="cpu", max_new_tokens_default=8, prefix_cache=True)
    assert reusing.cache_namespace == plain.cache_namespace + "-prefix"  # replies are cached apart
    examples = [
        {"role": "user", "content": "I moved to Porto."},
        {"role": "assistant", "content": "city: Porto"},
    ]
    calls = [[MESSAGES[0], *examples, {"role": "user", "content": f"I have {n} cats."}] for n in range(2, 5)]
    replies = [reusing.chat(messages) for messages in calls]
    assert (reusing.prefix_cache.misses, reusing.prefix_cache.hits) == (1, 2)  # one prefix, computed once
    assert [reply.text for reply in replies] == [plain.chat(messages).text for messages in calls]
    assert [reply.prompt_tokens for reply in replies] == [plain.chat(m).prompt_tokens for m in calls]

    # the next token's logits from the cached prefix equal a whole-prompt prefill's (fp32)
    model, tokenizer = reusing.model, reusing.tokenizer
    prompt = tokenizer.apply_chat_template(calls[0], add_generation_prompt=True, return_dict=True)[
        "input_ids"
    ]
    prefix = reusing.prefix_cache.prefix_ids(tokenizer, calls[0], prompt)
    assert 0 < len(prefix) < len(prompt)
    with torch.no_grad():
        whole = model(input_ids=torch.tensor([prompt])).logits[0, -1]
        rest = model(
            input_ids=torch.tensor([prompt[len(prefix) :]]),
            past_key_values=reusing.prefix_cache.cache_for(model, prefix),
        ).logits[0, -1]
    torch.testing.assert_close(rest, whole, atol=1e-4, rtol=1e-4)


def test_prompt_prefix_cache_skips_prompts_without_a_reusable_prefix(tiny_path: Path) -> None:
    reusing = HFChatModel(str(tiny_path), device="cpu", max_new_tokens_default=4, prefix_cache=True)
    single = [{"role": "user", "content": "Hello"}]
    reusing.chat(single)
    assert (reusing.prefix_cache.misses, reusing.prefix_cache.hits) == (0, 0)
    ids = reusing.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, return_dict=True)
    # a prefix whose tokens do not begin the prompt is not used
    assert reusing.prefix_cache.prefix_ids(reusing.tokenizer, MESSAGES, [0, *ids["input_ids"]]) == []


def test_after_unsloth_is_imported_a_cuda_model_is_refused_with_where_to_evaluate(
    tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unsloth patches transformers' model classes on import; a plain model then fails inside its
    inference path (seen on a GPU), so HFChatModel says where to evaluate instead."""
    import sys
    import types

    monkeypatch.setitem(sys.modules, "unsloth", types.ModuleType("unsloth"))
    with pytest.raises(RuntimeError, match="fresh process or kernel"):
        HFChatModel(str(tiny_path), device="cuda")
    HFChatModel(str(tiny_path), device="cpu")  # no GPU, no Unsloth patches in the way
