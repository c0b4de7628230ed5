"""The one call at the top of every study notebook: which profile, where it writes, said big and clear.

    from supersede_lib.studies.notebook import open_profile, show, show_figure
    profile = open_profile(profile)   # the parameters cell's value, papermill's, or $SUPERSEDE_PROFILE

The profile is the parameters cell's value when set (papermill's `-p profile X`), else
`$SUPERSEDE_PROFILE`, else `offline`, which runs anywhere: its model replies are committed. A
profile with a committed record (`offline`, `cpu_proof`) opened interactively (not under
`make reproduce`, which sets `SUPERSEDE_OUTPUT_DIR` itself) reads and writes a scratch copy of its
record under `.replay/notebook/`, so running a notebook never rewrites the committed files.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from supersede_lib import profiles
from supersede_lib.data import reachability
from supersede_lib.present.display import banner, run_warnings_box, show, show_figure, show_notes, show_values
from supersede_lib.profiles import Profile
from supersede_lib.results.headings import MATCHER
from supersede_lib.results.outputs import failed_runs, study_warnings

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILE_ENV",
    "environment_figure",
    "on_hosted_notebook",
    "open_profile",
    "profile_name",
    "show",
    "show_cpu_proof",
    "show_figure",
    "show_notes",
    "show_transfer",
    "show_values",
    "show_warnings",
]

PROFILE_ENV = "SUPERSEDE_PROFILE"
DEFAULT_PROFILE = "offline"
OUTPUT_DIR_ENV = "SUPERSEDE_OUTPUT_DIR"  # set by `make reproduce` (and tests): where the studies write
SCRATCH_ROOT = profiles.REPO_ROOT / ".replay" / "notebook"
NOT_COPIED = ("cache", "training")  # the response cache and checkpoints: remade, never copied


def profile_name(parameter: str | None = None) -> str:
    """The parameters cell's value, else $SUPERSEDE_PROFILE, else `offline`."""
    return parameter or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE


def scratch_copy(name: str, scratch_root: Path = SCRATCH_ROOT) -> Path | None:
    """Point this process's results at a scratch copy of a committed record; None when not needed.

    The copy is refreshed from the record each time (files a notebook made beside it stay), and
    `SUPERSEDE_OUTPUT_DIR` is set so processes the study starts write there too."""
    if os.environ.get(OUTPUT_DIR_ENV) or not reachability.has_record(name):
        return None
    source = profiles.REPO_ROOT / "outputs" / name
    shutil.copytree(
        source, scratch_root / name, ignore=shutil.ignore_patterns(*NOT_COPIED), dirs_exist_ok=True
    )
    os.environ[OUTPUT_DIR_ENV] = str(scratch_root)
    profiles.OUTPUT_ROOT = scratch_root
    return scratch_root / name


def use_save_dir(save_dir: str | os.PathLike[str]) -> Path:
    """Write (and read) every result and checkpoint under `save_dir`: a Google Drive folder on Colab
    (mounted here when it lies under /content/drive) or /kaggle/working on Kaggle, so a recycled
    runtime keeps the training, and 07 opened in a fresh runtime finds 06's checkpoints."""
    folder = Path(save_dir).expanduser()
    if str(folder).startswith("/content/drive") and not Path("/content/drive/MyDrive").exists():
        from google.colab import drive  # type: ignore[import-not-found]  # only on Colab

        drive.mount("/content/drive")
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[OUTPUT_DIR_ENV] = str(folder)
    profiles.OUTPUT_ROOT = folder
    return folder


def _chosen_by(name: str) -> str:
    """Who picked the profile, for the banner."""
    if os.environ.get(PROFILE_ENV) == name:
        return f"from ${PROFILE_ENV}"
    if name == DEFAULT_PROFILE and not os.environ.get(PROFILE_ENV):
        return "the default"
    return "set in the parameters cell or by papermill"


def open_profile(parameter: str | None = None, *, save_dir: str | None = None) -> Profile:
    """Load and validate the notebook's profile, and display which one runs, where it writes
    (`save_dir`: a folder that outlives the runtime, see `use_save_dir`)."""
    from IPython.display import display

    name = profile_name(parameter)
    if save_dir:
        use_save_dir(save_dir)
    scratch = scratch_copy(name)
    profile = profiles.load_profile(name)
    model = profile.model.get("name") or profile.model.get("model") or "?"
    grader = f"LLM judge {profile.judge.get('name', '?')}" if profile.judge else MATCHER
    where = (
        f"a scratch copy of its committed record ({scratch.relative_to(profiles.REPO_ROOT)})"
        if scratch
        else str(profiles.OUTPUT_ROOT / profile.name)
    )
    display(
        banner(
            f"Profile: {profile.name}",
            f"({_chosen_by(name)}) {profile.description} Data: {profile.data_label or '?'} · model: {model} · "
            f"grader: {grader} · results: {where}. Another profile: set {PROFILE_ENV} before starting "
            "Jupyter, or edit the parameters cell. Numbers labelled paper are quoted from the paper; "
            "ours are measured here with model, data, profile and n beside them, never mixed.",
        )
    )
    return profile


def on_hosted_notebook() -> bool:
    """Whether this kernel runs on Colab or Kaggle (where a notebook opened later gets a fresh VM)."""
    import sys

    return "google.colab" in sys.modules or bool(os.environ.get("KAGGLE_KERNEL_RUN_TYPE"))


def environment_figure(result: Any) -> Any:
    """Notebook 05 at a glance: termination, reward and reference accuracy, saturation; ours | paper."""
    from supersede_lib.present.overview_figures import validation_figure
    from supersede_lib.results import paper_results

    ours = {
        "rollouts terminated with an answer": result.terminated / max(result.n, 1),
        "environment reward accuracy (matcher)": result.environment_accuracy,
        f"reference accuracy ({result.reference_grader})": result.reference_accuracy,
        "saturation: full context, templated timelines": result.saturation_accuracy,
    }
    paper = {
        "rollouts terminated with an answer": 1.0,
        "environment reward accuracy (matcher)": paper_results.ENVIRONMENT_MATCHER_ACCURACY,
        "reference accuracy (LLM judge)": paper_results.ENVIRONMENT_JUDGE_ACCURACY,
        "saturation: full context, templated timelines": paper_results.SYNTHETIC_FULL_CONTEXT_ACCURACY,
    }
    return validation_figure(
        ours,
        paper,
        ours_title=f"ours: {result.model}, {result.profile.data_label}, {result.profile.name}, n={result.n}",
        paper_title=f"paper: gpt-4.1-mini, LongMemEval, n={paper_results.TABLE1_N} (saturation: frontier models)",
    )


def show_evaluation_sets(profile: Profile) -> None:
    """07's named evaluation sets (the CPU proof's held-out, harder and real-record sets), if any."""
    from supersede_lib.results import evidence
    from supersede_lib.studies import evaluation_sets

    sets = evaluation_sets.read_evaluation_sets(profile)
    if sets is None:
        print("This profile lists no evaluation sets (transfer.evaluations).")
        return
    for figure in sets.figures.values():
        show_figure(figure)
    for name, table in sets.tables.items():
        show(table, evidence.TITLES.get(name, name))
    if not sets.side_by_side.empty:
        show(sets.side_by_side, sets.side_by_side_title)


def show_transfer(result: Any) -> None:
    """Everything notebook 07 shows for a transfer result: Table 3 (if any), then the evaluation sets."""
    from supersede_lib.studies import transfer

    if isinstance(result, transfer.TransferResult):
        show_figure(result.figures["figure4b"])
        show(result.table, "Table 3 (ours)")
        show(result.paper_table, "Table 3 (paper, quoted)")
        print(transfer.transfer_summary_line(result))
        show(result.by_step, "Accuracy by step (mean over seeds, 95% interval from resampling questions)")
        if not result.curricula.empty:
            show(result.curricula, "Fixed vs adaptive curriculum, final checkpoints")
        if not result.rewards.empty:
            show(result.rewards, "Sparse vs memory reward, final checkpoints")
    show_evaluation_sets(result.profile)


CPU_PROOF = profiles.REPO_ROOT / "outputs" / "cpu_proof"


def _cpu_proof_figure(record: Path) -> Any:
    """The CPU proof's figure drawn again from its committed rollouts and held-out tables (colour by
    arm, line style by seed), or None when the rollouts are not in this checkout."""
    import pandas as pd

    from supersede_lib.results import evidence
    from supersede_lib.results.headings import NOTEBOOK_TRAINING, NOTEBOOK_TRANSFER

    rollouts = evidence.read_rollouts(record / NOTEBOOK_TRAINING)
    if rollouts is None or rollouts.empty:
        return None
    folder = record / NOTEBOOK_TRANSFER
    other = folder / "heldout-prefix-cache.csv"
    return evidence.training_and_evaluation_figure(
        rollouts,
        pd.read_csv(folder / "heldout.csv"),
        pd.read_csv(other) if other.exists() else None,
        by_arm=True,
    )


def show_cpu_proof(record: Path = CPU_PROOF) -> None:
    """The result that worked, read from the committed `cpu_proof` record: GRPO on a CPU lifts the
    0.5B's held-out accuracy on some seeds (training success and held-out accuracy per checkpoint)."""
    from supersede_lib.results import evidence
    from supersede_lib.results.headings import NOTEBOOK_TRANSFER

    folder = record / NOTEBOOK_TRANSFER
    heldout = folder / "heldout.csv"
    if not heldout.exists():
        print(f"The CPU proof's record is not in this checkout ({folder}).")
        return
    import pandas as pd

    show_figure(_cpu_proof_figure(record) or folder / evidence.FIGURE)
    table = pd.read_csv(heldout)
    table = table.assign(correct=table["correct"].astype(str) + "/" + table["n"].astype(str))
    columns = ["model", "correct", "accuracy", "ci_low", "ci_high", "b_base_only", "c_model_only", "p_exact"]
    show(
        table[columns],
        "CPU proof, held out (ours: Qwen2.5-Coder-0.5B-Instruct, synthetic easy, cpu_proof, n = 100, "
        "greedy, matcher; McNemar vs base). Paper: Qwen2.5-3B, LongMemEval oracle, n = 78: 9.0% -> 16.7%.",
    )


def show_warnings(result: Any) -> None:
    """Display every warning of the runs a study result's folder holds (sub-folders too: 07's sets),
    each once, the runs in which every question failed first."""
    from IPython.display import display

    directory = Path(result.output_dir)
    manifests = {
        path.relative_to(directory).as_posix().removesuffix(".manifest.json"): json.loads(path.read_text())
        for path in sorted(directory.rglob("*.manifest.json"))
    }
    failed = [
        f"every question failed in {run}: its numbers are not results"
        for run in failed_runs(directory, manifests)
    ]
    display(run_warnings_box(failed + study_warnings(directory, manifests)))
