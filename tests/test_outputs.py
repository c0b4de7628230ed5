"""Committed results carry no machine paths: every absolute path a run saw is written relative to the
repository (or as `~/...`), so outputs/ reads the same on every clone."""

import re
import subprocess
from pathlib import Path

import pytest

from supersede_lib.eval.run_files import REPO_ROOT, portable_path, portable_paths
from supersede_lib.reproduce.notebooks import strip_machine_paths

ABSOLUTE_PATH = re.compile(r"[\"' (=]/(home|root|work|tmp|Users|var|opt|mnt)/[A-Za-z]")


def _committed_outputs() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "outputs"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [REPO_ROOT / name for name in listed]


def test_no_committed_output_holds_an_absolute_machine_path() -> None:
    offenders = []
    for path in _committed_outputs():
        if path.suffix in {".png", ".gz", ".sqlite"} or not path.exists():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if ABSOLUTE_PATH.search(line):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}")
    assert not offenders, f"absolute paths in committed outputs: {offenders[:10]}"


def test_result_writers_make_paths_portable(tmp_path: Path) -> None:
    record = {"dir": str(REPO_ROOT / "outputs" / "x"), "nested": [str(Path.home() / "m.gguf"), "plain text"]}
    assert portable_paths(record) == {"dir": "outputs/x", "nested": ["~/m.gguf", "plain text"]}
    assert portable_path(REPO_ROOT) == "."
    executed = tmp_path / "nb.ipynb"
    executed.write_text(f'{{"path": "{REPO_ROOT}/notebooks/01_data.ipynb", "home": "{Path.home()}/x"}}')
    strip_machine_paths(executed)
    assert executed.read_text() == '{"path": "notebooks/01_data.ipynb", "home": "~/x"}'
