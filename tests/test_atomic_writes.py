"""A run's files and figures are written whole or not at all: a crash mid-write keeps the old file.

The crash is real, not mocked: a child process rewrites the files under a file-size limit
(`RLIMIT_FSIZE`, the way a full disk stops a write), so each write fails part-way through.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

resource = pytest.importorskip("resource", reason="file-size limits are POSIX")

WRITE_LIMIT_BYTES = 16384  # a large file fails part-way through; a small one is written
SMALL, LARGE = 3, 2000  # rows, trajectories, manifest entries or plotted points

CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    from pathlib import Path

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from supersede_lib.eval.run_files import write_run_outputs
    from supersede_lib.present.plots import save_figure

    folder, limit = Path(sys.argv[1]), int(sys.argv[2])
    rows, trajectories, entries, points = (int(value) for value in sys.argv[3:7])
    frame = pd.DataFrame({"episode_id": [f"question-{i}" for i in range(rows)], "correct": [True] * rows})
    records = [{"episode_id": f"question-{i}", "notes": "x" * 40} for i in range(trajectories)]
    manifest = {"totals": {"questions": rows}, "padding": ["y" * 40] * entries}
    figure, axes = plt.subplots(figsize=(2 + points / 200, 2 + points / 1000))
    axes.plot(range(points), [index % 7 for index in range(points)])
    if limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        write_run_outputs(folder, "run", frame, records, manifest)
        save_figure(figure, folder / "figure.png")
    except OSError as error:
        print(json.dumps({"failed": type(error).__name__}))
    else:
        print(json.dumps({"failed": None}))
    """
)

FILES = ("run.csv", "run.trajectories.jsonl", "run.manifest.json", "figure.png")


def _write_in_child(folder: Path, sizes: dict[str, int], limit: int = 0) -> dict:
    counts = [str(sizes.get(name, SMALL)) for name in FILES]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), str(limit), *counts],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("broken", FILES)
def test_a_crash_mid_write_leaves_the_old_file_whole(tmp_path: Path, broken: str) -> None:
    """The first file too large for the limit breaks part-way; it must read as it did before."""
    assert _write_in_child(tmp_path, {}) == {"failed": None}
    before = (tmp_path / broken).read_bytes()
    assert _write_in_child(tmp_path, {broken: LARGE}, WRITE_LIMIT_BYTES) == {"failed": "OSError"}
    assert (tmp_path / broken).read_bytes() == before  # the old file, whole: never half of the new one
    assert not list(tmp_path.glob(".*.tmp"))  # and no temporary file is left behind
