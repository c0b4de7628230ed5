"""`python -m supersede_lib.reproduce --profile X [--only 01,02]`: run the notebooks headless, then the report.

Every notebook in notebooks/ runs in name order with papermill (kernel `python3`, parameter
`profile=X`); executed copies land in outputs/<profile>/executed/. The run stops at the first
failing notebook and says which one, which error, and where its executed copy is. When the
`local` profile cannot download LongMemEval, the message says to use PROFILE=offline.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from supersede_lib.eval.run_files import PORTABLE_ROOTS
from supersede_lib.studies import profiles, report

NOTEBOOK_DIR = profiles.REPO_ROOT / "notebooks"
KERNEL_NAME = "python3"
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
    """What ran, how long each took, and the report it produced."""

    profile: str
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


def executed_dir(profile: str) -> Path:
    path = profiles.OUTPUT_ROOT / profile / "executed"
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
        )
    except Exception as error:  # papermill raises PapermillExecutionError, kernel errors, timeouts
        raise NotebookFailed(notebook, output, error) from error
    finally:
        if output.exists():
            strip_machine_paths(output)
    return output


def strip_machine_paths(path: Path) -> None:
    """Executed copies get committed: the checkout's and home's absolute paths become relative / `~/`."""
    text = path.read_text(encoding="utf-8")
    for root, shown in PORTABLE_ROOTS:
        text = text.replace(f"{root}/", shown).replace(str(root), shown.rstrip("/") or ".")
    path.write_text(text, encoding="utf-8")


def reproduce(
    profile: str,
    only: Sequence[str] | None = None,
    *,
    notebooks_dir: Path = NOTEBOOK_DIR,
    kernel_name: str = KERNEL_NAME,
    write_report: bool = True,
    log: Callable[[str], None] = print,
) -> ReproduceRun:
    """Execute the notebooks for `profile` in order, then write outputs/<profile>/REPORT.md."""
    loaded = profiles.load_profile(profile)  # fail fast on an unknown profile
    paths = notebook_paths(only, notebooks_dir)
    run = ReproduceRun(profile=profile)
    target = executed_dir(profile)
    started = time.perf_counter()
    for index, notebook in enumerate(paths, start=1):
        log(f"[{index}/{len(paths)}] {notebook.name} (profile {profile}) ...")
        notebook_started = time.perf_counter()
        output = execute_notebook(notebook, profile, target / notebook.name, kernel_name=kernel_name)
        run.seconds[notebook.name] = time.perf_counter() - notebook_started
        run.executed.append(output)
        log(f"[{index}/{len(paths)}] {notebook.name} done in {run.seconds[notebook.name]:.1f} s -> {output}")
        recorded = profiles.save_recorded_responses(loaded)  # after every notebook: a crash loses nothing
        if recorded is not None:
            log(f"recorded responses: {recorded} replies -> {loaded.recorded_responses}")
    if write_report:
        run.report = report.write_report(profile)
        log(f"report: {run.report}")
    run.total_s = time.perf_counter() - started
    log(f"{len(paths)} notebook(s) for profile {profile} in {run.total_s:.1f} s")
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--profile", default="local", help=f"one of {', '.join(profiles.PROFILES)} (default: local)"
    )
    parser.add_argument("--only", default="", help="comma-separated notebook prefixes, e.g. 01,02")
    parser.add_argument("--no-report", action="store_true", help="skip writing REPORT.md")
    parser.add_argument(
        "--live",
        action="store_true",
        help="make every model call again instead of replaying cached or recorded responses",
    )
    args = parser.parse_args(argv)
    if args.live:
        os.environ[profiles.LIVE_CALLS_ENV] = "1"  # the notebook kernels inherit it
    only = [prefix for prefix in args.only.split(",") if prefix.strip()] or None
    try:
        reproduce(args.profile, only, write_report=not args.no_report)
    except NotebookFailed as failure:
        print(f"STOPPED: {failure}", file=sys.stderr)
        return 1
    except (profiles.ProfileError, ValueError) as error:
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
