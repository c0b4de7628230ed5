"""Where a recorded result came from: the commit of the code that made it, and whether that was clean.

A committed number is only as good as the trail back to the code and configuration that produced
it. Every run file, recorded model reply and training run carries `git_state()` (the commit, and
whether the checkout had uncommitted changes outside `outputs/`), and a live run refuses to write
into the committed `outputs/` from a changed checkout unless the user allows it
(`SUPERSEDE_ALLOW_DIRTY=1`, `reproduce --allow-dirty`), in which case the hash of the diff is
recorded so the exact code can at least be recognised. Results files under `outputs/` are excluded
from "dirty": a study rewrites them while it runs, so counting them would mark every run dirty.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR_NAME = "outputs"  # written by the studies themselves: not part of the code's state
ALLOW_DIRTY_ENV = "SUPERSEDE_ALLOW_DIRTY"
PINNED_STATE_ENV = "SUPERSEDE_PINNED_GIT_STATE"  # set by `pin_checkout_state` for child processes

_first_checkout_state: dict[str, Any] | None = None


class DirtyCheckoutError(RuntimeError):
    """A live run would write results into outputs/ from code that is not committed."""


def _git(args: list[str], repo_dir: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo_dir, capture_output=True, text=True, timeout=30, check=True
    ).stdout


def _code_pathspec() -> list[str]:
    """Every tracked path except the results the studies write."""
    return ["--", ".", f":(exclude){RESULTS_DIR_NAME}"]


def git_state(repo_dir: Path | None = None) -> dict[str, Any]:
    """`{"commit", "dirty"}` of the code this process runs (results under outputs/ excluded); nulls
    without git.

    For the project's own checkout (no `repo_dir`) that is the state when the process first asked,
    or the one its parent command pinned (`pin_checkout_state`): a run that takes hours must name
    the code it started from, not a commit made while it ran. A dirty state also carries
    `diff_sha256`, the hash of `git diff HEAD` over the code, so two runs from the same uncommitted
    change can be told apart from two different changes.
    """
    if repo_dir is None:
        return dict(_checkout_state())
    return read_git_state(repo_dir)


def pin_checkout_state() -> dict[str, Any]:
    """Read the checkout's state once and hand it to every child process (a notebook's kernel),
    so a long command's results all name the code it was started from."""
    state = _checkout_state()
    os.environ[PINNED_STATE_ENV] = json.dumps({"root": str(REPO_ROOT), "state": state})
    return dict(state)


def _checkout_state() -> dict[str, Any]:
    """The pinned state of this checkout: inherited from the parent command, else read at first use."""
    global _first_checkout_state
    inherited = _inherited_state()
    if inherited is not None:
        return inherited
    if _first_checkout_state is None:
        _first_checkout_state = read_git_state(REPO_ROOT)
    return _first_checkout_state


def _inherited_state() -> dict[str, Any] | None:
    """The parent's pinned state when it pinned this same checkout (a child in another clone reads its own)."""
    try:
        pinned = json.loads(os.environ.get(PINNED_STATE_ENV, ""))
        return pinned["state"] if pinned["root"] == str(REPO_ROOT) else None
    except (json.JSONDecodeError, KeyError, TypeError):
        return None


def read_git_state(repo_dir: Path) -> dict[str, Any]:
    """`git_state` read from `repo_dir` now (no pinning)."""
    try:
        commit = _git(["rev-parse", "HEAD"], repo_dir).strip()
        status = _git(["status", "--porcelain", "--untracked-files=no", *_code_pathspec()], repo_dir)
        state: dict[str, Any] = {"commit": commit or None, "dirty": bool(status.strip())}
        if state["dirty"]:
            diff = _git(["diff", "HEAD", *_code_pathspec()], repo_dir)
            state["diff_sha256"] = hashlib.sha256(diff.encode("utf-8")).hexdigest()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return state


def commit_label(state: dict[str, Any] | None = None) -> str | None:
    """`<sha>` or `<sha>-dirty` (as a recorded reply keeps it); None without git."""
    state = git_state() if state is None else state
    if state["commit"] is None:
        return None
    return state["commit"] + ("-dirty" if state["dirty"] else "")


def dirty_allowed() -> bool:
    """`SUPERSEDE_ALLOW_DIRTY=1` (`reproduce --allow-dirty`): live results may come from uncommitted code."""
    return os.environ.get(ALLOW_DIRTY_ENV, "").strip().lower() in {"1", "true", "yes"}


def is_committed_results_dir(path: Path) -> bool:
    """True for a folder inside the repository's own outputs/ that git does not ignore (what
    `git add` would record): a diagnosis under the ignored outputs/diagnose/ is not the record."""
    try:
        Path(path).resolve().relative_to((REPO_ROOT / RESULTS_DIR_NAME).resolve())
    except ValueError:
        return False
    try:
        ignored = (
            subprocess.run(
                ["git", "check-ignore", "-q", str(path)], cwd=REPO_ROOT, capture_output=True, timeout=30
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        ignored = False
    return not ignored


def check_clean_for_results(path: Path, state: dict[str, Any] | None = None) -> dict[str, Any]:
    """Refuse to write results into the committed outputs/ from uncommitted code; return the state.

    Folders outside outputs/ (a replay's scratch folder, a test's tmp folder) are always allowed.
    """
    state = git_state() if state is None else state
    if state.get("dirty") and is_committed_results_dir(path) and not dirty_allowed():
        raise DirtyCheckoutError(
            f"refusing to write results into {path}: the checkout has uncommitted code changes "
            f"(diff sha256 {state.get('diff_sha256', '?')[:12]}). Commit them first, so the results name "
            f"the code that made them, or allow it explicitly with --allow-dirty ({ALLOW_DIRTY_ENV}=1; "
            "the diff's hash is recorded)."
        )
    return state


def config_sha256(config: dict[str, Any]) -> str:
    """A stable hash of a JSON-able configuration (keys sorted), so two runs can be shown identical."""
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
