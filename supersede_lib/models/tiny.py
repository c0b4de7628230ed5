"""A tiny random Qwen2-architecture chat model built offline, for tests and the `smoke` profile.

No download and no pretrained weights: a byte-level BPE tokenizer is trained with `tokenizers`
on a few hundred strings in this repo's own vocabulary (notes, sessions, questions), wrapped with
a ChatML chat template, and paired with a randomly initialised 2-layer Qwen2 model. Everything is
saved with `save_pretrained`, so it loads by path exactly like a real checkpoint
(`AutoModelForCausalLM.from_pretrained(path)`), which is what the training and HF-model code paths
need to exercise end to end in seconds on a CPU. Its replies are noise, by construction.
"""

from __future__ import annotations

import os
from pathlib import Path

from supersede_lib.agent import prompts

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TINY_MODEL_MARKER = "tiny-supersede"


def _training_corpus() -> list[str]:
    """A few hundred strings shaped like what the tiny model will be prompted with."""
    cities = ["Detroit", "Austin", "Lisbon", "Osaka", "Denver", "the suburbs", "Berlin", "Toronto"]
    pets = ["Rex", "Luna", "Milo", "Bella", "Max"]
    default = prompts.get_prompt_variant(prompts.DEFAULT_PROMPT_VARIANT)
    lines = [
        default.notes_system,
        *default.notes_examples[0],
        default.answer_system,
        default.full_context_system,
    ]
    for index in range(300):
        city, other = cities[index % len(cities)], cities[(index * 3 + 1) % len(cities)]
        pet = pets[index % len(pets)]
        lines += [
            f"user: I moved from {city} to {other} last month, {pet} loves it.",
            f"assistant: Congratulations on the move to {other}!",
            f"Current notes (at most {100 + index} characters):\n- lives in {city}; pet {pet}",
            f"New conversation (2023/05/{index % 28 + 1:02d} (Tue) 10:{index % 60:02d}):",
            f"My notes:\n- lives in {other}\n\nCurrent date: 2023/06/01\nQuestion: Where do I live now?",
            f"You live in {other}. I don't know. That information is not available.",
        ]
    return lines


def build_tiny_model(output_dir: str | os.PathLike, vocab_size: int = 768, seed: int = 0) -> Path:
    """Train the tokenizer, build the random model, save both under `output_dir`; return the path.

    Idempotent: when `output_dir` already holds a tiny model it is returned as is.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    path = Path(output_dir)
    if (path / "config.json").exists() and (path / "tokenizer.json").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_training_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        padding_side="left",
        model_max_length=4096,
    )
    tokenizer.chat_template = CHATML_TEMPLATE

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.config.name_or_path = TINY_MODEL_MARKER
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
