"""Write the study notebooks (01-10) from the cell sources below (committed without outputs).

    .venv/bin/python notebooks/make_study_notebooks.py

The notebooks are views: an install cell that only acts on Colab/Kaggle, a `parameters` cell
(papermill overrides `profile`), then calls into the study module it shows
(`supersede_lib.studies.<study>`) and display. Edit the cells here and re-run this script rather
than editing the .ipynb files by hand.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NOTEBOOK_DIR = Path(__file__).resolve().parent

# Where Colab/Kaggle clone the repository from: the one line a user edits in the install cell
# (this repository has no GitHub remote of its own to take it from).
REPO_URL = "https://github.com/OWNER/supersede.git"

STUDY_EXTRAS = "embedded,env"  # Colab/Kaggle already ship Jupyter, pandas, matplotlib and seaborn
TRAINING_EXTRAS = "embedded,env,train"
KAGGLE_GPU_NOTE = "Kaggle: Settings > Internet on, Accelerator > GPU T4 (on a P100 the training falls back to the CPU preset)"


def install_cell(extras: str = STUDY_EXTRAS, gpu_addons: bool = False) -> str:
    """The cell under the title: on Colab/Kaggle only, clone and install once, then ask for a restart.

    The GPU is detected with `nvidia-smi`, not torch: importing torch before pip swaps packages
    would leave the running kernel on the old ones. Shown collapsed (Colab form, Jupyter hidden input).
    """
    gpu = (
        """
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        # Unsloth + TRL for the CUDA training path; keeps the platform's own torch (requirements-gpu.txt)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", checkout + "/requirements-gpu.txt"], check=True)"""
        if gpu_addons
        else ""
    )
    shutil_import = "import shutil\n" if gpu_addons else ""
    kaggle = f"{KAGGLE_GPU_NOTE}" if gpu_addons else "Kaggle: Settings > Internet on"
    return f"""\
# @title Colab / Kaggle: clone and install once (does nothing elsewhere) {{ display-mode: "form" }}
import importlib.util
import os
{shutil_import}import subprocess
import sys

REPO_URL = "{REPO_URL}"  # @param {{type: "string"}} — edit: the git URL of your copy

on_hosted_notebook = "google.colab" in sys.modules or os.environ.get("KAGGLE_KERNEL_RUN_TYPE")
if on_hosted_notebook and importlib.util.find_spec("supersede_lib") is None:
    if "/OWNER/" in REPO_URL:
        raise SystemExit("Edit REPO_URL in this cell to the git URL of your copy, then run it again.")
    checkout = os.path.abspath("supersede")
    if not os.path.isdir(checkout) and subprocess.run(["git", "clone", "--depth", "1", REPO_URL, checkout]).returncode:
        raise SystemExit("git clone failed. {kaggle}; check REPO_URL.")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", checkout + "[{extras}]"], check=True){gpu}
    raise SystemExit(
        "Installed. Restart the runtime now (Colab: Runtime > Restart session), then run all cells again: "
        "the running kernel still holds the packages that pip replaced."
    )"""


PARAMETERS_CELL = """\
import os

# papermill overrides this cell (-p profile smoke | offline | local | paper); else $SUPERSEDE_PROFILE, else offline
profile = os.environ.get("SUPERSEDE_PROFILE", "offline")"""

TRAINING_PARAMETERS_CELL = f"""\
import os

# papermill overrides this cell (-p profile smoke | offline | cpu_proof | local | paper | colab)
profile = os.environ.get("SUPERSEDE_PROFILE")  # None picks by device: colab on a T4, else offline
# A folder that outlives the runtime, for results and checkpoints (06 and 07 must name the same one):
# Colab: "/content/drive/MyDrive/supersede" (mounted when run); Kaggle: "/kaggle/working/supersede"
save_dir = os.environ.get("SUPERSEDE_SAVE_DIR")
# {KAGGLE_GPU_NOTE}"""

# 06 only: evaluate the checkpoints in the same runtime (07 opened from its badge starts a fresh VM)
RUN_07_PARAMETER = """
run_07_here = None  # None: yes on Colab/Kaggle; True/False: always/never (notebook 07 does it otherwise)"""

# A literal parameters cell lets papermill read its default; the device decides in the next cell.
TRAINING_PROFILE_CELL = """\
from supersede_lib.train.config import cuda_device_name, preset_for_device

profile = profile or preset_for_device(cuda_device_name(), default="offline")"""


DISPLAY_HELPERS = ("show", "show_figure", "show_values", "show_warnings")


def imports_cell(study: str, *, save_dir: bool = False, helpers: tuple[str, ...] = DISPLAY_HELPERS) -> str:
    """Imports (sorted as ruff's isort wants them) and the one call that opens the profile, said big."""
    opened = "open_profile(profile, save_dir=save_dir)" if save_dir else "open_profile(profile)"
    return f"""\
from supersede_lib.studies import {study}
from supersede_lib.studies.notebook import {", ".join(("open_profile", *helpers))}

profile = {opened}  # the validated profile; the banner says which one ran and where it writes"""


def _helpers_used(cells: list) -> tuple[str, ...]:
    """The display helpers the notebook's cells call (the imports cell imports only those)."""
    sources = "\n".join(cell.source for cell in cells if cell.cell_type == "code")
    return tuple(name for name in DISPLAY_HELPERS if f"{name}(" in sources)


def _collapsed(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Input hidden in JupyterLab, shown as a one-line form on Colab."""
    cell.metadata["jupyter"] = {"source_hidden": True}
    cell.metadata["cellView"] = "form"
    return cell


def _notebook(
    title: str,
    intro: str,
    cells: list,
    *,
    study: str,
    install: str | None = None,
    parameters_cell: str = PARAMETERS_CELL,
) -> nbformat.NotebookNode:
    parameters = new_code_cell(parameters_cell)
    parameters.metadata["tags"] = ["parameters"]
    training = "save_dir" in parameters_cell
    notebook = new_notebook(
        cells=[
            new_markdown_cell(f"# {title}\n\n{intro}"),
            _collapsed(new_code_cell(install or install_cell())),
            parameters,
            *([new_code_cell(TRAINING_PROFILE_CELL)] if training else []),
            new_code_cell(imports_cell(study, save_dir=training, helpers=_helpers_used(cells))),
            *cells,
        ],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
    )
    return notebook


def data_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "01 · Data: LongMemEval knowledge-update and the procedural generator",
        "Which questions the studies ask, how long their histories are, and what the procedural generator "
        "produces at each difficulty (paper §3-4). With a LongMemEval profile the statistics cover the "
        "knowledge-update subset on each split the studies use (oracle: evidence sessions only; `_s`: "
        "~48 sessions per question); with the offline/smoke profiles they describe the synthetic stand-in.",
        [
            new_code_cell(
                "overview = data_overview.data_overview(profile)\nshow(overview.summary_table, 'Per split / episode set')"
            ),
            new_markdown_cell(
                "## The data at a glance\n\nHow many sessions and tokens each question's history has, where in the "
                "history the evidence sessions (the fact and its updates) fall, and one episode's timeline."
            ),
            new_code_cell(
                "from supersede_lib.present.overview_figures import data_figure\n\n"
                "show_figure(data_figure(overview.statistics, overview.episodes))"
            ),
            new_markdown_cell(
                "Per-question statistics (first rows of each set; the full CSVs are in the output folder)."
            ),
            new_code_cell("for label, frame in overview.statistics.items():\n    show(frame.head(8), label)"),
            new_markdown_cell(
                "## The procedural generator\n\nOne sample episode per difficulty preset. The paper found "
                "explicit templated updates saturated for frontier models in full context (§4); the harder "
                "presets paraphrase updates and bury them among distractor sessions."
            ),
            new_code_cell(
                "show(overview.generator_configs, 'Presets')\nshow(overview.generator_samples, 'Samples')"
            ),
            new_markdown_cell(
                "## Episode explorer\n\nStep through an episode's sessions (steps count from 1; the last step is "
                "the answer, with the final notes it was given). Evidence sessions are marked. Once notebook 02 "
                "has run for this profile, the notes the bounded-memory agent held after each session appear "
                "beside it (re-run this cell after 02). Without a live kernel (an executed copy, its HTML) a "
                "static walk-through of the first episode shows instead."
            ),
            new_code_cell(
                "from supersede_lib.present import explorer\n\n"
                "explorer.episode_explorer(overview.episodes, data_overview.latest_trajectories(profile))"
            ),
            new_code_cell("print('outputs:', overview.output_dir)"),
        ],
        study="data_overview",
    )


def isolation_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "02 · Isolation: full context vs bounded memory (paper §5.1, Table 1)",
        "The same questions, the same model, two conditions: every session in context (an upper bound where "
        "memory is not the bottleneck) versus a notes field of B = 300 characters rewritten after each "
        "session, raw sessions never re-fed. Paired McNemar test over the questions; the failures of the "
        "bounded agent are classified automatically from its trajectories.",
        [
            new_code_cell(
                "result = isolation.run_isolation(profile)\nshow(result.table, 'Table 1 (one model)')\nshow_warnings(result)"
            ),
            new_code_cell(
                "show(result.accuracy, 'Accuracy with 95% Wilson intervals')\n"
                "show_values(result.mcnemar, 'McNemar, paired on the same questions')"
            ),
            new_code_cell("show_figure(result.figures['accuracy'])"),
            new_markdown_cell(
                "## Why the bounded agent fails\n\n*never entered*: the current value never reached the notes; "
                "*squeezed out*: it was there and got compressed away; *kept stale*: the notes end with a "
                "superseded value instead; *held but missed*: the notes held it but the answer did not use it."
            ),
            new_code_cell(
                "show(result.failure_counts, 'Failure classes')\n"
                "if 'failures' in result.figures:\n"
                "    show_figure(result.figures['failures'])"
            ),
            new_code_cell("show(result.examples.head(10), 'Full context right, bounded memory wrong')"),
            new_code_cell("print('outputs:', result.output_dir)"),
        ],
        study="isolation",
    )


def frontier_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "03 · Frontier: does a bigger model close the gap? (paper Table 1, Figure 2)",
        "The isolation comparison for every model in the profile's `frontier.models`, on the same questions. "
        "The paper's models and ours sit in separate columns and separate figure panels.",
        [
            new_code_cell(
                "result = frontier.run_frontier(profile)\nshow(result.table, 'Table 1')\nshow_warnings(result)"
            ),
            new_code_cell("show(result.accuracy, 'Accuracy with 95% Wilson intervals')"),
            new_code_cell("show_figure(result.figures['figure2'])"),
            new_code_cell(
                "show(result.failure_counts, 'Failure classes by model')\n"
                "if 'failures' in result.figures:\n"
                "    show_figure(result.figures['failures'])"
            ),
            new_code_cell("print('outputs:', result.output_dir)"),
        ],
        study="frontier",
    )


def scale_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "04 · Scale, not size (paper §5.2, Table 2, Figure 3)",
        "Three bounded-memory conditions: short history at B = 300, long history at B = 300, and long "
        "history with a budget proportional to the number of sessions (150 characters per session). If the "
        "proportional budget recovers nothing although the answers change, the failure tracks conversation "
        "length rather than the compression ratio. Graded by the programmatic matcher throughout.",
        [
            new_code_cell(
                "result = scale.run_scale(profile)\nshow(result.table, 'Table 2')\nshow_warnings(result)"
            ),
            new_code_cell(
                "show(result.accuracy, 'Accuracy per condition')\n"
                "print(f'answers differ between the two long conditions: {result.answers_differ}/{result.answers_compared}')\n"
                "show_values(result.mcnemar_long, 'McNemar: long history, fixed B vs 150 characters per session')\n"
                "show_values(result.mcnemar_short_long, 'McNemar: short vs long history at fixed B')"
            ),
            new_code_cell("show_figure(result.figures['figure3'])"),
            new_code_cell(
                "show(result.failure_counts, 'Failure classes per condition')\n"
                "if 'failures' in result.figures:\n"
                "    show_figure(result.figures['failures'])"
            ),
            new_code_cell("print('outputs:', result.output_dir)"),
        ],
        study="scale",
    )


def environment_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "05 · Environment validation and the synthetic saturation check (paper §4, §5.2)",
        "The verifiers environment (`supersede.load_environment` / `SupersedeEnv`) runs end to end on every "
        "question with the profile's model served on a local OpenAI-compatible endpoint: every rollout must "
        "terminate with an answer, and its intrinsic matcher reward is set beside the judge's accuracy (or, "
        "without a judge, the evaluation runner's matcher accuracy on the same questions). Then the saturation "
        "check: explicit templated timelines in full context, which the paper found trivial for frontier models.",
        [
            new_code_cell(
                "result = environment_validation.run_environment_validation(profile)\n"
                "show(result.table, 'Environment validation')\n"
                "print('all rollouts terminated:', result.all_terminated)\n"
                "show_warnings(result)"
            ),
            new_markdown_cell("The validation at a glance: ours and the paper's, in separate panels."),
            new_code_cell(
                "from supersede_lib.studies.notebook import environment_figure\n\nshow_figure(environment_figure(result))"
            ),
            new_code_cell("show(result.rollouts.drop(columns=['error']).head(20), 'Environment rollouts')"),
            new_code_cell("show(result.saturation_table, 'Synthetic saturation')"),
            new_code_cell("print('outputs:', result.output_dir)"),
        ],
        study="environment_validation",
    )


def training_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "06 · GRPO with LoRA, Unsloth-accelerated on a GPU (paper §5.3, Figure 4a)",
        "The bounded-memory agent is trained with GRPO (TRL's `GRPOTrainer`, LoRA) on procedural supersession "
        "episodes. Every rollout comes from the same rollout core as evaluation: one notes rewrite per session, "
        "then the answer from the notes alone, and each turn is trained on exactly the prompt the policy saw. "
        "The reward is the environment's rubric (current value +1, stale value −λ); every turn of a trajectory "
        "carries that trajectory's group-relative advantage. On a CUDA GPU the model is loaded in 4 bit and "
        "LoRA-patched by Unsloth; on a CPU by transformers + PEFT. A run stops by itself after 10 consecutive "
        "zero-advantage batches (the paper's stop at step 174), saves adapters every `save_steps`, and resumes "
        "from its last checkpoint when this notebook is run again. See `docs/training.md` for the design. "
        "On a GPU, `!python -m supersede_lib gpu-check` first checks the training path in ~3 minutes "
        "(Unsloth in bf16 and fp16, plain PEFT, fp32 adapters; report in `outputs/gpu_check/`).",
        [
            new_markdown_cell(
                "## The result that worked: the CPU proof\n\n"
                "Read from the committed `cpu_proof` record (no training here): Qwen2.5-Coder-0.5B-Instruct trained "
                "with GRPO on a 2-core CPU, 20 steps per run, several reward arms and seeds, judged greedily on 100 "
                "held-out episodes. Left: training success per step; right: held-out accuracy per checkpoint "
                "(colour = arm, line style = seed). Some seeds double the base's accuracy; some empty their notes "
                "and fall below it (docs/results.md)."
            ),
            new_code_cell("from supersede_lib.studies.notebook import show_cpu_proof\n\nshow_cpu_proof()"),
            new_markdown_cell(
                "## This profile's training\n\n"
                "One run per reward, curriculum and seed of the profile's `training:` block: `fixed` is the "
                "paper's (one difficulty throughout); `adaptive` moves up the generator's difficulty ladder when "
                "most rollouts of the groups succeed, so the advantage does not vanish. The `sparse` reward is "
                "the paper's (the answer alone); `memory` adds credit when the notes hold the current value."
            ),
            new_code_cell(
                "result = training.run_training(profile)\n"
                "print('device:', result.summary['device'])\n"
                "show(result.runs_table, 'Training runs')\n"
                "show(result.paper_table, 'Training: the paper beside ours')"
            ),
            new_code_cell("show_figure(result.figures['figure4a'])"),
            new_markdown_cell(
                "What the policy wrote at the last step (final notes and answer, with the reward)."
            ),
            new_code_cell(
                "show(training.sample_rollouts(result, per_run=4, at='last'), 'Last-step rollouts')"
            ),
            new_code_cell("print('outputs:', result.output_dir)"),
            new_markdown_cell(
                "## Did the training learn?\n\n"
                "From the rollouts every run logged: did the last quarter of steps succeed more often than the "
                "first (one-sided Fisher over rollouts), and what did writing notes pay in the first half "
                "against leaving them empty? (The `cpu_proof` profile is the CPU proof that it does: the 0.5B, "
                "reward arms and a stale-penalty sweep, `make reproduce PROFILE=cpu_proof "
                "REPRODUCE_ARGS='--only 06,07'`.)"
            ),
            new_code_cell(
                "from supersede_lib.results import evidence\n\n"
                "for name, table in evidence.read_tables(result.output_dir, (evidence.TREND, evidence.NOTES_PAYOFF)).items():\n"
                "    show(table, evidence.TITLES[name])"
            ),
            new_markdown_cell(
                "## Notebook 07 in this runtime\n\n"
                "On Colab or Kaggle, notebook 07 opened from its badge starts a fresh runtime that cannot see these "
                "checkpoints (unless both name the same `save_dir`), so here it runs in the same one: every "
                "checkpoint against the base on held-out questions (Table 3, Figure 4b)."
            ),
            new_code_cell(
                "from supersede_lib.studies import transfer\n"
                "from supersede_lib.studies.notebook import on_hosted_notebook, show_transfer\n\n"
                "if run_07_here or (run_07_here is None and on_hosted_notebook()):\n"
                "    show_transfer(transfer.run_transfer(profile))\n"
                "else:\n"
                "    print('Notebook 07 evaluates these checkpoints (or set run_07_here = True to do it here).')"
            ),
        ],
        study="training",
        install=install_cell(TRAINING_EXTRAS, gpu_addons=True),
        parameters_cell=TRAINING_PARAMETERS_CELL + RUN_07_PARAMETER,
    )


def transfer_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "07 · Transfer evaluation of every checkpoint (paper Table 3, Figure 4b)",
        "The base model and every adapter checkpoint from notebook 06 answer held-out questions that training "
        "never saw, in the bounded-memory condition, graded by the programmatic matcher: LongMemEval "
        "knowledge-update oracle questions for the `local` and `paper` profiles, held-out hard synthetic episodes "
        "for `offline`. Base and trained models differ only by the adapter (checked by hashing every base "
        "tensor). Each checkpoint is compared with the base on the same questions (paired McNemar).",
        [
            new_markdown_cell(
                "Table 3 and Figure 4b when the profile has `transfer.episodes`: accuracy per checkpoint, then by "
                "step averaged over seeds (95% interval from resampling questions), fixed vs adaptive curriculum and "
                "sparse vs memory reward at each run's final checkpoint.\n\n"
                "Then the named evaluation sets (`transfer.evaluations`): the CPU proof judges its checkpoints "
                "greedily on 100 held-out episodes of their training distribution (a generator seed training never "
                "used), on the harder transfer set, and on real LongMemEval records where the local file is present, "
                "each against the base on the same questions (McNemar). Sets ending in `-prefix-cache` ran on the "
                "prompt-prefix engine, each against the base judged by that same engine; the engine check compares "
                "the two engines on the same models. Then what every part cost, and the base's and the first arm's "
                "final checkpoint's notes and answers side by side, where their verdicts differ first."
            ),
            new_code_cell(
                "from supersede_lib.studies.notebook import show_transfer\n\n"
                "result = transfer.run_transfer(profile)\n"
                "show_transfer(result)\n"
                "show_warnings(result)"
            ),
            new_code_cell("print('outputs:', result.output_dir)"),
        ],
        study="transfer",
        install=install_cell(TRAINING_EXTRAS, gpu_addons=True),
        parameters_cell=TRAINING_PARAMETERS_CELL,
    )


def memory_systems_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "08 · Memory systems on trial: which memory design handles supersession, at what cost",
        "Every memory policy (the paper's notes rewrite, the line-edit notes, append-and-truncate, a "
        "Letta-style core-memory block, an observation log with a reflector, a latest-value resolver, and "
        "any policy registered since) on the same questions, model, budget B and grader, with full context "
        "as the ceiling. Each policy sees each session once and hands the same answer prompt at most B "
        "characters. Per model and policy: accuracy with a 95% Wilson interval, stale answers, what the "
        "memory held at answer time, memory failures, calls and tokens per episode; each policy paired with "
        "the paper's notes rewrite (exact McNemar, Holm within a model).",
        [
            new_markdown_cell(
                "## Decided before the runs\n\nThe design, the measures, the test and the predictions M1-M6 (which "
                "policy should lose which way) were committed before the first live run: "
                "[docs/memory-systems-log.md](../docs/memory-systems-log.md). Read them before the table."
            ),
            new_code_cell(
                "result = memory_systems.run_memory_systems(profile)\n"
                "show(result.table, 'Memory policies per model (reference: ' + result.reference + ')')\n"
                "show_warnings(result)"
            ),
            new_code_cell(
                "if 'accuracy_vs_cost' in result.figures:  # every row refused: no point to draw\n"
                "    show_figure(result.figures['accuracy_vs_cost'])"
            ),
            new_code_cell(
                "show(result.accuracy, 'Per model and policy (tidy rows)')\n"
                "show(result.mcnemar, 'Paired with the reference: exact McNemar, Holm within model')"
            ),
            new_code_cell(
                "show(result.predictions, 'Predictions M1-M6 of docs/memory-systems-log.md, kept or broken')\n"
                "show(result.prediction_clauses, 'Each prediction clause by clause, with the numbers it read')"
            ),
            new_code_cell(
                "if not result.sanity.empty:\n"
                "    show(result.sanity, 'Real LongMemEval records (sanity row; counts only)')"
            ),
            new_code_cell("print('outputs:', result.output_dir)"),
        ],
        study="memory_systems",
    )


def robustness_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "09 · Robustness: perturbations that keep the answer determined",
        "Each perturbation turns an unperturbed episode into its twin (another tracked fact, someone "
        "else's update, a reverted value, ...; docs/perturbations.md) whose gold stays determined. An "
        "agent that tracks superseded facts answers both alike; one that took a shortcut does not. Per "
        "model and condition: accuracy on the twins beside the unperturbed episodes, the paired drop with "
        "its bootstrap 95% interval, exact McNemar, Holm across perturbations (docs/robustness-log.md). "
        "A profile with trained policies (`robustness.trained`) also judges the log's predictions P1-P7.",
        [
            new_code_cell(
                "result = robustness.run_robustness(profile)\n"
                "show(result.table, 'Drop from the unperturbed twin')\nshow_warnings(result)"
            ),
            new_code_cell("show_figure(result.figures['drops'])"),
            new_code_cell(
                "if not result.predictions.empty:  # a profile with trained policies: P1-P7 of the log\n"
                "    show(result.predictions, 'Predictions of docs/robustness-log.md, kept or broken')\n"
                "    show(result.prediction_clauses, 'Each prediction clause by clause, with the numbers it read')"
            ),
            new_code_cell(
                "changed = result.per_pair[result.per_pair['correct_unperturbed'] & ~result.per_pair['correct_perturbed']]\n"
                "show(changed.head(10), 'Right on the unperturbed episode, wrong on its twin')"
            ),
            new_code_cell("print('outputs:', result.output_dir)"),
        ],
        study="robustness",
    )


def fast_slow_notebook() -> nbformat.NotebookNode:
    return _notebook(
        "10 · Fast and slow: an optimised memory instruction (GEPA) against trained weights (GRPO)",
        "GEPA rewrites the notes instruction of the registered agent (the one text the 0.5B is told when it "
        "writes its notes) on the selection set, with the metric calls GRPO spent on rollouts (160) and 4x; "
        "the instruction it chooses is judged once on the registered test set beside the base, the "
        "format-controlled base and the `verdict` seeds, labelled by the rule fixed before any GEPA call: "
        "as good as RL, better, or falls short. Then the curve, the instruction beside the original, the "
        "cost, the drift of each kind of learning from the base, the two combined, and the perturbation suite.",
        [
            new_markdown_cell(
                "## Decided before the runs\n\nThe budgets, the split, the primary comparison and what counts "
                "as *as good as RL* were committed before the first GEPA call: "
                "[docs/fast-slow-log.md](../docs/fast-slow-log.md). A piece whose inputs are missing (a twin "
                "not kept yet) prints one line and is left out."
            ),
            new_code_cell(
                "result = fast_slow.run_fast_slow(profile)\n"
                "show(result.table, 'The registered test set: GEPA beside the registered rows')\n"
                "show_values(result.labels, 'The pre-registered label of each GEPA budget')\n"
                "show_warnings(result)"
            ),
            new_code_cell(
                "show(result.comparisons, 'Paired by episode: exact McNemar, Holm across the seeds')"
            ),
            new_code_cell("if 'curve' in result.figures:\n    show_figure(result.figures['curve'])"),
            new_code_cell(
                "for label, instruction in result.instructions.items():\n"
                "    print(f'--- {label} ---\\n{instruction}\\n')"
            ),
            new_code_cell(
                "show(result.cost, 'What each GEPA run cost')\n"
                "show(result.kl, 'Drift from the base: token-level KL(base || adapter) on the probe set')\n"
                "if not result.drops.empty:\n"
                "    show(result.drops_table, 'The perturbation suite: the drop from the unperturbed twin')"
            ),
            new_code_cell("print('outputs:', result.output_dir)"),
        ],
        study="fast_slow",
    )


NOTEBOOKS = {
    "01_data.ipynb": data_notebook,
    "02_isolation.ipynb": isolation_notebook,
    "03_frontier.ipynb": frontier_notebook,
    "04_scale.ipynb": scale_notebook,
    "05_environment_validation.ipynb": environment_notebook,
    "06_grpo_training.ipynb": training_notebook,
    "07_transfer_eval.ipynb": transfer_notebook,
    "08_memory_systems.ipynb": memory_systems_notebook,
    "09_robustness.ipynb": robustness_notebook,
    "10_fast_slow.ipynb": fast_slow_notebook,
}


def main() -> None:
    for name, build in NOTEBOOKS.items():
        notebook = build()
        for index, cell in enumerate(notebook.cells):
            cell["id"] = f"{Path(name).stem[:2]}-cell-{index:02d}"  # stable ids: no diff noise on rebuild
        nbformat.validate(notebook)
        nbformat.write(notebook, NOTEBOOK_DIR / name)
        print(f"wrote {NOTEBOOK_DIR / name}")


if __name__ == "__main__":
    main()
