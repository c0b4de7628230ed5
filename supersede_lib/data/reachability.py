"""Before a long run: can a profile's downloads be reached? If not, one short line says what to run.

    python3 -m supersede_lib reachable local [--live]   # exit 0: go on; 3: one line on stderr

`make reproduce` runs it first, before installing anything, so it uses the standard library only
and runs from its path with any Python 3. A profile needs the Hugging Face hub when it reads
LongMemEval (`source: longmemeval`) without a local copy (`$SUPERSEDE_LONGMEMEVAL_DIR`, or an
earlier download under `data/longmemeval/`), or names an embedded GGUF file that is not in
`$SUPERSEDE_MODEL_DIR` or `~/.cache/supersede/models/`. Then one HEAD request with a short timeout
asks whether the hub answers; any HTTP answer counts as reachable (the download reports its own
errors later), only a failure to connect does not. A profile with a committed record (`offline`,
`cpu_proof`) is replayed from it and needs nothing, unless the run is `--live`.
"""

from __future__ import annotations

import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
HUB_ENDPOINT_ENV = "HF_ENDPOINT"
DEFAULT_HUB = "https://huggingface.co"
TIMEOUT_S = 5.0
UNREACHABLE_EXIT = 3
OFFLINE_ADVICE = "make reproduce PROFILE=offline"


def _config_text(profile: str) -> str:
    path = Path(profile) if profile.endswith((".yaml", ".yml")) else REPO_ROOT / "configs" / f"{profile}.yaml"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _longmemeval_is_local() -> bool:
    """A local copy the loader would use without the network (the env folder, or an earlier download)."""
    named = os.environ.get("SUPERSEDE_LONGMEMEVAL_DIR")
    if named:
        return Path(named).expanduser().exists()  # a wrong path is the loader's error to name, not ours
    cache = REPO_ROOT / "data" / "longmemeval"
    return cache.is_dir() and any(cache.rglob("longmemeval_oracle*.json"))


def _missing_model_files(config_text: str) -> list[str]:
    """The embedded GGUF files the profile names that no model folder holds."""
    folders = [Path(os.environ["SUPERSEDE_MODEL_DIR"])] if os.environ.get("SUPERSEDE_MODEL_DIR") else []
    folders.append(Path.home() / ".cache" / "supersede" / "models")
    names = dict.fromkeys(re.findall(r"model_file:\s*([\w.\-]+\.gguf)", config_text))
    return [name for name in names if not any((folder / name).is_file() for folder in folders)]


def hub_downloads(profile: str) -> list[str]:
    """What this profile would fetch from the hub before it can run (empty: nothing)."""
    text = _config_text(profile)
    needed = []
    if re.search(r"source:\s*longmemeval\b", text) and not _longmemeval_is_local():
        needed.append("LongMemEval")
    needed += _missing_model_files(text)
    return needed


def hub_reachable(endpoint: str | None = None, timeout_s: float = TIMEOUT_S) -> bool:
    """Whether the hub answers at all (an HTTP error status still means it is reachable)."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0"):
        return False
    url = (endpoint or os.environ.get(HUB_ENDPOINT_ENV) or DEFAULT_HUB).rstrip("/") + "/api/datasets"
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return True


def has_record(profile: str) -> bool:
    """Whether git tracks files under outputs/<profile>/ (a record the run replays)."""
    listed = subprocess.run(
        ["git", "ls-files", "--", f"outputs/{profile}/"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    return listed.returncode == 0 and bool(listed.stdout.strip())


def unreachable_message(profile: str, *, live: bool = False) -> str | None:
    """None when the profile can start; else the one line to print (what is missing, what to run)."""
    recorded = has_record(profile)
    needed = [] if recorded and not live else hub_downloads(profile)
    if not needed or hub_reachable():
        return None
    what = needed[0] if len(needed) == 1 else f"{needed[0]} and {len(needed) - 1} more download(s)"
    advice = f"make reproduce PROFILE={profile} (replays its record)" if recorded else OFFLINE_ADVICE
    return f"Profile {profile} needs {what} from the Hugging Face hub, which is not reachable. Without internet run: {advice}"
