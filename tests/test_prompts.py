"""The prompt variants as data: every live text pinned, and the loader's errors."""

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import make_episode

from supersede_lib.agent import prompts
from supersede_lib.agent.rollout import make_rollout

# sha256 of every field of each variant but its summary. Recorded replies are keyed on the exact
# texts, so a change here would make every committed result of that variant unreplayable: write a
# new variant instead (and add its fingerprint).
FINGERPRINTS = {
    "v1_worked_example": "e3960618d26f45d33037f3487d0edb5ae969738ce9128fcd2768accc6c7fa59b",
    "v1_no_example": "250c36b8e3a199a46f66d5e93c5cd38be7962f647da110cbaa79222de7f7258d",
    "v9_line_edits": "110cf4d17fadf558a449192777e81d90c80b453515cc1e810bc2ec2ff616e000",
    "v10_line_edits_loose_answer": "a2b48e2a8657727a301950dec1860aca179582304dd9edaf7ef76eb81bf58c44",
    "v12_line_edits_times_kept": "6f751c77ccdbb3c2dc1d7125ed0ce164fc6e91c62778d89cccf85e91837a28c3",
    "v12_line_edits_repaired": "e6e2b024b9cc81c20e7384f5b6a565569680fd9c6d0e108028c7388b59f2ae32",
}


def _fingerprint(prompt_set: prompts.PromptSet) -> str:
    fields = {key: value for key, value in asdict(prompt_set).items() if key != "summary"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode("utf-8")).hexdigest()


def test_every_variant_sends_exactly_the_texts_its_recorded_replies_were_made_with() -> None:
    assert {name: _fingerprint(variant) for name, variant in prompts.PROMPT_VARIANTS.items()} == FINGERPRINTS


def test_a_variant_based_on_another_changes_only_what_it_sets() -> None:
    variants = prompts.PROMPT_VARIANTS
    v9, v10 = variants["v9_line_edits"], variants["v10_line_edits_loose_answer"]
    v12 = variants["v12_line_edits_times_kept"]
    assert v10.answer_system != v9.answer_system and v10.notes_system == v9.notes_system
    assert v12.keep_times and not v10.keep_times and v12.answer_system == v10.answer_system


def test_worked_examples_look_exactly_like_the_real_request() -> None:
    v9 = prompts.PROMPT_VARIANTS["v9_line_edits"]
    first_write, update, _ = (user for user, _ in v9.notes_examples)
    assert first_write.startswith("You have no memory file yet.\n\nNew conversation (2021/09/14)")
    assert update.startswith("Memory file now:\nviolin teacher: Ms. Okafor\n")
    v1 = prompts.PROMPT_VARIANTS["v1_worked_example"]
    example_user, example_reply = v1.notes_examples[0]
    assert example_user.startswith(
        "Current notes (at most 120 characters):\n- lives in Detroit; dog named Rex\n\n"
    )
    assert example_reply == "- lives in the suburbs (moved from Detroit, Apr 2023); dog named Rex"
    real = make_rollout(make_episode("ep-1", 1), "bounded_memory", notes_budget_chars=300).current_messages()
    real = real[-1]["content"]
    assert real.split("\n", 1)[0] == example_user.split("\n", 1)[0].replace("120", "300")


def test_every_example_word_is_a_marker_of_an_echo() -> None:
    assert prompts.ALL_EXAMPLE_MARKERS == (
        "Detroit",
        "Rex",
        "Okafor",
        "Lindqvist",
        "Trek",
        "violin",
        "scales",
    )


def _write(tmp_path: Path, variants: str) -> Path:
    path = tmp_path / "variants.yaml"
    defaults = "defaults: {full_context_system: s, full_context_user: u, empty_notes: e, notes_session_roles: [user]}\n"
    base = "  base: {summary: b, notes_system: s, notes_user: u, answer_system: a, answer_user: q}\n"
    path.write_text(defaults + "variants:\n" + base + variants, encoding="utf-8")
    return path


def test_a_misspelt_key_names_the_file_the_variant_and_the_allowed_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, "  child: {based_on: base, summary: c, answer_sytem: x}\n")
    with pytest.raises(
        ValueError, match=r"variants\.yaml: child: unknown keys \['answer_sytem'\].*answer_system"
    ):
        prompts.load_prompt_variants(path)


def test_based_on_must_name_a_variant_defined_above(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"child\.based_on: 'later'"):
        prompts.load_prompt_variants(_write(tmp_path, "  child: {based_on: later, summary: c}\n"))
    loaded = prompts.load_prompt_variants(
        _write(tmp_path, "  child: {based_on: base, summary: c, answer_system: x}\n")
    )
    assert loaded["child"].answer_system == "x" and loaded["child"].notes_system == "s"
    assert loaded["child"].notes_session_roles == ("user",)
