"""The GPU check's own logic, run on this CPU (no GPU here; its Unsloth checks run on a real GPU only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supersede_lib.cli import gpu_check as gpu_check_command
from supersede_lib.train import gpu_check


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_on_a_cpu_it_refuses_without_allow_cpu(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        gpu_check_command.main(["--out", "unused"])
    assert "no CUDA GPU" in capsys.readouterr().err


def test_plain_training_and_generation_checks_pass_and_are_reported(tmp_path: Path) -> None:
    out = tmp_path / "report"
    code = gpu_check_command.main(
        ["--allow-cpu", "--checks", "transformers", "transformers_prefix", "generation", "--out", str(out)]
    )
    record = json.loads((out / gpu_check.REPORT_JSON).read_text())
    checks = {check["name"]: check for check in record["checks"]}
    assert code == 0, record
    training = checks["transformers"]["detail"]
    assert training["final_step"] == 2 and training["adapter_moved"]
    assert training["adapter_dtypes"] == ["torch.float32"] == training["optimizer_moment_dtypes"]
    assert "checkpoint" not in training  # a temporary path, not reported
    assert checks["generation"]["ok"] and len(checks["generation"]["detail"]["replies"]) == 2
    table = (out / gpu_check.REPORT_MD).read_text()
    assert "| transformers | yes |" in table and "| generation | yes |" in table


def test_the_importance_sampling_check_reports_the_gap_and_weight_of_each_step(tmp_path: Path) -> None:
    out = tmp_path / "report"
    code = gpu_check_command.main(["--allow-cpu", "--checks", "transformers_is", "--out", str(out)])
    record = json.loads((out / gpu_check.REPORT_JSON).read_text())
    detail = record["checks"][0]["detail"]
    assert code == 0, record
    assert len(detail["sampling_logp_gap"]) == 2 == len(detail["is_ratio"])
    assert all(0 < ratio <= 3.0 for ratio in detail["is_ratio"])  # TRL's default cap
    assert "mean importance weight" in (out / gpu_check.REPORT_MD).read_text()


def test_a_failing_check_is_reported_and_the_rest_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(config):
        raise AssertionError("adapter saved as ['torch.bfloat16'], not float32")

    monkeypatch.setattr(gpu_check, "check_training", broken)
    monkeypatch.setattr(
        gpu_check, "in_fresh_process", lambda function, *args: function(*args)
    )  # see the patch
    results = gpu_check.run_checks(tmp_path, ["transformers", "generation"])
    assert [(r.name, r.ok) for r in results] == [("transformers", False), ("generation", False)]
    assert "not float32" in results[0].error and "no adapter" in results[1].error
    table = gpu_check.write_report(results, gpu_check.environment(), tmp_path / "out").read_text()
    assert "| transformers | NO |" in table


def test_lora_b_and_dtype_readers(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    path = tmp_path / "adapter.safetensors"
    save_file({"x.lora_A.weight": torch.ones(2, 2), "x.lora_B.weight": torch.zeros(2, 2)}, str(path))
    assert gpu_check.lora_b_is_zero(path) and gpu_check.tensor_dtypes(path) == {"torch.float32"}
    save_file({"x.lora_B.weight": torch.full((2, 2), 0.5, dtype=torch.bfloat16)}, str(path))
    assert not gpu_check.lora_b_is_zero(path) and gpu_check.tensor_dtypes(path) == {"torch.bfloat16"}


def test_the_logit_check_catches_a_prefix_cache_that_lost_the_prefix(
    tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import DynamicCache

    from supersede_lib.agent import prompts
    from supersede_lib.models.hf import HFChatModel, PromptPrefixCache

    model = HFChatModel(str(tiny_path), device="cpu")
    answer_system = prompts.get_prompt_variant(prompts.DEFAULT_PROMPT_VARIANT).answer_system
    messages = [
        {"role": "system", "content": answer_system},
        {"role": "user", "content": "Where do I live now?"},
    ]
    assert gpu_check.prefix_logit_gap(model, messages) < gpu_check.MAX_LOGIT_GAP
    monkeypatch.setattr(PromptPrefixCache, "cache_for", lambda self, network, prefix: DynamicCache())
    assert gpu_check.prefix_logit_gap(model, messages) > gpu_check.MAX_LOGIT_GAP
