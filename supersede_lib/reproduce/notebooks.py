"""Replay or run the notebooks headless for a profile (`python -m supersede_lib reproduce`).

Every notebook in notebooks/ runs in name order with papermill (kernel `python3`, parameter
`profile=X`). A profile with a committed record is replayed from its recorded replies into a
scratch folder and checked table by table against the record (nothing tracked is rewritten); any
other profile runs into outputs/<profile>/, executed copies in outputs/<profile>/executed/ (a replay's
in .replay/<profile>/executed/; neither is committed). The run stops at the first
failing notebook and says which one, which error, and where its executed copy is. A profile whose
downloads cannot be reached (`data.reachability`) stops before the first notebook with one line
saying what to run instead (PROFILE=offline).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from traitlets.config import Config

from supersede_lib import profiles
from supersede_lib.eval.provenance import check_clean_for_results
from supersede_lib.eval.run_files import PORTABLE_ROOTS
from supersede_lib.models.chat import redact_credentials
from supersede_lib.reproduce import record, report, verify

NOTEBOOK_DIR = profiles.REPO_ROOT / "notebooks"
REPLAY_ROOT = profiles.REPO_ROOT / ".replay"  # git-ignored scratch: where a replay writes
OUTPUT_DIR_ENV = "SUPERSEDE_OUTPUT_DIR"
MODES = ("replay", "run", "live", "record")
# the profile blocks each notebook needs: a profile without them skips the notebook (cpu_proof: 06-07)
NOTEBOOK_BLOCKS = {
    "01": ("isolation", "scale"),
    "02": ("isolation",),
    "03": ("frontier",),
    "04": ("scale",),
    "05": ("environment", "saturation"),
    "06": ("training",),
    "07": ("transfer",),
    "08": ("memory_systems",),
    "09": ("robustness",),
    "10": ("fast_slow",),
}
MODES_HELP = """modes:
  (default)  a profile with a committed record (outputs/<profile>/ in git) is REPLAYED: recorded
             replies -> a scratch folder (.replay/); every committed table is compared with its
             replay, one verdict printed, exit 1 if any differs. Tracked files stay untouched.
             A profile without a record is RUN: results go to outputs/<profile>/, calls cached.
  --live     make every model call again and write into outputs/ (needs a clean checkout).
  --run      write into outputs/ like --live, but read back the replies already in the local cache:
             how a --live run stopped by a kill or a session's end is finished without paying twice.
  --record   replay, then adopt the tables that changed into outputs/ keeping recorded live
             measurements: regenerate the record on purpose after an intended change.
  --save-responses  write the local cache (an unfinished run's replies too) to the profile's
             recorded-responses file and stop: commit it, and --run on another machine reads the
             paid calls back from it."""
KERNEL_NAME = "python3"
# The kernel talks to papermill over local IPC sockets, not TCP: nothing else can reach it, and the
# kernel no longer warns on every start that TCP without CurveZMQ keys is unencrypted
KERNEL_CONFIG = Config({"KernelManager": {"transport": "ipc"}})
DATA_UNAVAILABLE_HINT = (
    "LongMemEval could not be loaded. Run the offline profile instead (synthetic data, no network): "
    "make reproduce PROFILE=offline — or point SUPERSEDE_LONGMEMEVAL_DIR at a local copy."
)


class NotebookFailed(RuntimeError):
    """A notebook raised; the message names it, the error, and its executed copy."""

    def __init__(self, notebook: Path, executed: Path, error: BaseException) -> None:
        self.notebook, self.executed, self.error = notebook, executed, error
        ename = getattr(error, "ename", type(error).__name__)
        evalue = getattr(error, "evalue", str(error))
        message = f"{notebook.name} failed: {ename}: {evalue}\nexecuted copy: {executed}"
        data_missing = ename == "DataUnavailableError" or "DataUnavailableError" in str(evalue)
        if data_missing and "PROFILE=offline" not in str(evalue):
            message += f"\n{DATA_UNAVAILABLE_HINT}"
        super().__init__(message)


@dataclass
class ReproduceRun:
    """What ran, how, how long each took, the verdict of a replay and the report it produced."""

    profile: str
    mode: str = "replay"
    output_root: Path = field(default_factory=lambda: profiles.OUTPUT_ROOT)
    verdict: verify.Verdict | None = None
    report_current: bool | None = None
    executed: list[Path] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    report: Path | None = None
    total_s: float = 0.0


def notebook_paths(only: Sequence[str] | None = None, notebooks_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """The notebooks to run, in name order; `only` keeps those whose name starts with a prefix."""
    paths = sorted(path for path in notebooks_dir.glob("*.ipynb") if not path.name.startswith("."))
    if only:
        prefixes = [prefix.strip() for prefix in only if prefix.strip()]
        paths = [path for path in paths if any(path.name.startswith(prefix) for prefix in prefixes)]
        if not paths:
            raise ValueError(f"--only {','.join(prefixes)} matches no notebook in {notebooks_dir}")
    if not paths:
        raise ValueError(f"no notebooks in {notebooks_dir}")
    return paths


def executed_dir(profile: str, output_root: Path | None = None) -> Path:
    path = (output_root or profiles.OUTPUT_ROOT) / profile / "executed"
    path.mkdir(parents=True, exist_ok=True)
    return path


def execute_notebook(notebook: Path, profile: str, output: Path, *, kernel_name: str = KERNEL_NAME) -> Path:
    """Run one notebook with papermill (parameter `profile`); raise `NotebookFailed` on an error."""
    import papermill

    try:
        papermill.execute_notebook(
            str(notebook),
            str(output),
            parameters={"profile": profile},
            kernel_name=kernel_name,
            cwd=str(notebook.parent),
            progress_bar=False,
            config=KERNEL_CONFIG,
        )
    except Exception as error:  # papermill raises PapermillExecutionError, kernel errors, timeouts
        raise NotebookFailed(notebook, output, error) from error
    finally:
        if output.exists():
            strip_machine_paths(output)
    return output


def strip_machine_paths(path: Path) -> None:
    """Executed copies get committed: the checkout's and home's absolute paths become relative / `~/`."""
    text = redact_credentials(path.read_text(encoding="utf-8"))  # and no key or URL credential
    for root, shown in PORTABLE_ROOTS:
        text = text.replace(f"{root}/", shown).replace(str(root), shown.rstrip("/") or ".")
    path.write_text(text, encoding="utf-8")


def reproduce(
    profile: str,
    only: Sequence[str] | None = None,
    *,
    mode: str = "auto",
    notebooks_dir: Path = NOTEBOOK_DIR,
    kernel_name: str = KERNEL_NAME,
    write_report: bool = True,
    replay_root: Path | None = None,
    log: Callable[[str], None] = print,
) -> ReproduceRun:
    """Execute the notebooks for `profile` in order, as a replay, a live run or a recording.

    `replay` runs from recorded replies into a scratch folder and compares every committed table with
    its replay (`run.verdict`): tracked files stay untouched. `run` writes into outputs/ (cached calls
    reused) and `live` also makes every model call again; both are refused from uncommitted code
    unless allowed. `auto` replays a profile that has a committed record and runs any other.
    `record` replays and then adopts what changed into outputs/, keeping the live measurements
    already recorded: the way to regenerate the record on purpose after an intended change.
    """
    has_record = has_committed_record(profile)
    mode = ("replay" if has_record else "run") if mode == "auto" else mode
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected auto or one of {', '.join(MODES)}")
    if mode in ("replay", "record") and not has_record:
        raise ValueError(f"profile {profile}: no committed record under outputs/{profile}/ to {mode}")
    loaded = profiles.load_profile(profile)  # fail fast on an unknown profile
    paths = runnable_notebooks(loaded, notebook_paths(only, notebooks_dir), log)
    if mode in ("replay", "record"):
        paths = recorded_notebooks(profile, paths, log)
    committed_root = profiles.OUTPUT_ROOT
    if mode != "replay":
        check_clean_for_results(committed_root / profile)
    root = (
        committed_root
        if mode in ("run", "live")
        else prepare_replay_tree(profile, replay_root or REPLAY_ROOT, paths)
    )
    run = ReproduceRun(profile=profile, mode=mode, output_root=root)
    started_wall, started = time.time(), time.perf_counter()
    with _study_environment(root, live=mode == "live"):
        _run_notebooks(run, loaded, paths, kernel_name, log)
    if mode == "replay":
        run.verdict = verify.compare_trees(profile, committed_root / profile, root / profile, started_wall)
        run.report_current = report_is_current(profile, committed_root)
        log(run.verdict.report())
        log(report_line(profile, run.report_current))
    elif mode == "record":
        run.verdict = verify.compare_trees(profile, committed_root / profile, root / profile, started_wall)
        adopted = record.adopt_replay(run.verdict, root / profile, committed_root / profile)
        log(
            f"recorded: {len(adopted)} file(s) regenerated into {committed_root / profile} (live measurements kept)"
        )
    if write_report and mode != "replay":
        run.report = report.write_report(profile, committed_root)
        log(f"report: {run.report}")
    run.total_s = time.perf_counter() - started
    log(f"{len(paths)} notebook(s) for profile {profile} ({mode}) in {run.total_s:.1f} s")
    return run


def _run_notebooks(
    run: ReproduceRun,
    profile: profiles.Profile,
    paths: list[Path],
    kernel_name: str,
    log: Callable[[str], None],
) -> None:
    """Execute each notebook in order; a live run saves the recorded replies after every notebook."""
    target = executed_dir(profile.name, run.output_root)
    for index, notebook in enumerate(paths, start=1):
        log(f"[{index}/{len(paths)}] {notebook.name} (profile {profile.name}, {run.mode}) ...")
        notebook_started = time.perf_counter()
        output = execute_notebook(notebook, profile.name, target / notebook.name, kernel_name=kernel_name)
        run.seconds[notebook.name] = time.perf_counter() - notebook_started
        run.executed.append(output)
        log(f"[{index}/{len(paths)}] {notebook.name} done in {run.seconds[notebook.name]:.1f} s -> {output}")
        if run.mode in ("run", "live"):  # after every notebook: a crash loses nothing already paid for
            recorded = profiles.save_recorded_responses(profile)
            if recorded is not None:
                log(f"recorded responses: {recorded} replies -> {profile.recorded_responses}")


def runnable_notebooks(
    profile: profiles.Profile, paths: list[Path], log: Callable[[str], None] = print
) -> list[Path]:
    """The notebooks whose profile blocks exist; each skipped one is named with the block it lacks."""
    kept = []
    for path in paths:
        missing = [
            block for block in NOTEBOOK_BLOCKS.get(path.name[:2], ()) if getattr(profile, block) is None
        ]
        if missing:
            log(f"skipped {path.name}: profile {profile.name} has no {', '.join(missing)} block")
        else:
            kept.append(path)
    if not kept:
        raise ValueError(
            f"profile {profile.name}: none of the chosen notebooks has its blocks in {profile.source}"
        )
    return kept


def recorded_notebooks(profile: str, paths: list[Path], log: Callable[[str], None] = print) -> list[Path]:
    """The notebooks a replay can check: those with committed files in outputs/<profile>/<notebook>/.
    A notebook whose block the profile has but whose record nobody made yet is named and skipped,
    never run live in its place (its replies are not recorded: a replay would call the model)."""
    kept = []
    for path in paths:
        if has_committed_record(f"{profile}/{path.stem}"):
            kept.append(path)
        else:
            log(
                f"skipped {path.name}: not recorded yet for {profile} (no committed outputs/{profile}/"
                f"{path.stem}/; `reproduce --profile {profile} --only {path.name[:2]} --live` records it)"
            )
    return kept


def has_committed_record(profile: str) -> bool:
    """Whether outputs/<profile>/ holds committed files: a record to replay and check."""
    committed = subprocess.run(
        ["git", "ls-files", "--", f"outputs/{profile}/"],
        cwd=profiles.REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return bool(committed.strip())


RUN_RESULT_SUFFIXES = (".csv", ".trajectories.jsonl")
NEVER_COPIED = {"cache", "training"}  # the response cache and checkpoints: never part of a replay


def _not_copied_into_a_replay(directory: str, names: list[str]) -> set[str]:
    """The response cache, checkpoints, and every model run's results (the `.csv` and `.trajectories.jsonl`
    beside a `<run>.manifest.json`): a study that finds a run's results reads them back instead of
    replaying it, so they are left out and the replay must make them again from the recorded replies
    (the manifest stays: it names the model and cache namespace the replies were recorded under).
    Inputs no replay can make (finished training runs, their metrics and rollouts) are copied."""
    runs = {name.removesuffix(".manifest.json") for name in names if name.endswith(".manifest.json")}
    return NEVER_COPIED | {
        run + suffix for run in runs for suffix in RUN_RESULT_SUFFIXES if run + suffix in names
    }


def prepare_replay_tree(profile: str, replay_root: Path, replayed: Sequence[Path] | None = None) -> Path:
    """A fresh scratch copy of outputs/<profile>/ under `replay_root` (inputs such as finished training
    runs are read from it); the replay rewrites its tables there, never in outputs/.

    Run results are left out only in the folders of the `replayed` notebooks (default: every folder):
    a notebook that is not replayed (`--only 10` leaves out 07) keeps its run results, because a later
    notebook reads them as inputs (10's table holds 07's registered rows)."""
    target = replay_root / profile
    if target.exists():
        shutil.rmtree(target)
    source = profiles.OUTPUT_ROOT / profile
    if source.exists():
        folders = None if replayed is None else {path.stem for path in replayed}

        def ignore(directory: str, names: list[str]) -> set[str]:
            inside = Path(directory).relative_to(source).parts
            if folders is not None and inside and inside[0] not in folders:
                return NEVER_COPIED & set(names)
            return _not_copied_into_a_replay(directory, names)

        shutil.copytree(source, target, ignore=ignore)
    target.mkdir(parents=True, exist_ok=True)
    return replay_root


@contextlib.contextmanager
def _study_environment(output_root: Path, *, live: bool) -> Iterator[None]:
    """The notebook kernels inherit where to write (`SUPERSEDE_OUTPUT_DIR`) and whether to call live."""
    saved = {name: os.environ.get(name) for name in (OUTPUT_DIR_ENV, profiles.LIVE_CALLS_ENV)}
    os.environ[OUTPUT_DIR_ENV] = str(output_root)
    if live:
        os.environ[profiles.LIVE_CALLS_ENV] = "1"
    else:
        os.environ.pop(profiles.LIVE_CALLS_ENV, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def report_is_current(profile: str, output_root: Path) -> bool | None:
    """Whether the committed REPORT.md is exactly what the committed files give (None: no report)."""
    path = output_root / profile / report.REPORT_FILE
    if not path.exists():
        return None
    return path.read_text(encoding="utf-8") == report.build_report(profile, output_root)


def report_line(profile: str, current: bool | None) -> str:
    if current is None:
        return f"REPORT.md: none committed for {profile}"
    if current:
        return "REPORT.md: current (regenerated from the committed files, identical)"
    return f"REPORT.md DIFFERS from what the committed files give: make report PROFILE={profile}, then commit"
