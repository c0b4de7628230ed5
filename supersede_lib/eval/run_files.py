"""The files one run writes, and the provenance they carry.

`<run_name>.csv` (one row per question), `<run_name>.trajectories.jsonl` (one record per rollout:
notes after every session, answer, verdict and reason) and `<run_name>.manifest.json` (settings,
model, episodes, git commit, package versions, token and cache totals, failed questions, cut
and empty replies, the concurrency limit's history, accuracy, and warnings worth reading). The
commit a manifest names is the code's (`provenance.git_state`: results under outputs/ excluded).
Every file is written whole or not at all (`write_bytes_atomic`): a crash, a kill or a full disk
mid-write leaves the previous file, never half of a new one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import sys
import tempfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.provenance import REPO_ROOT, config_sha256, git_state
from supersede_lib.models import cpu_features
from supersede_lib.models.chat import ChatModel, one_line, redact_credentials, redact_json

# how committed results show a local path: relative to the checkout, or under ~/
PORTABLE_ROOTS = ((REPO_ROOT, ""), (Path.home().resolve(), "~/"))

KEY_PACKAGES = (
    "supersede",
    "openai",
    "pandas",
    "numpy",
    "tqdm",
    "xllamacpp",
    "transformers",
    "torch",
    "trl",
    "peft",
    "verifiers",
)


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write `data` whole or not at all: a temporary file in the same folder, then `os.replace`.

    A reader (another run, a crash, a full disk) sees the old file or the new one, never half of
    one; the same folder keeps the rename on one filesystem, where it is atomic.
    """
    path = Path(path)
    handle = tempfile.NamedTemporaryFile(
        "wb", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            handle.write(data)
        # a temporary file is private (0600); the file keeps the mode of the one it replaces
        os.chmod(handle.name, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    """`text` as UTF-8, written whole or not at all (`write_bytes_atomic`)."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def default_run_name(
    condition: str,
    model_name: str,
    notes_budget_chars: int | None,
    chars_per_session: int | None,
    memory: str = "notes",
) -> str:
    """A file-safe run name such as `bounded_memory__gpt-4.1-mini__B300` (a memory policy other than
    the notes adds its name: `bounded_memory__gpt-4.1-mini__B300__core_memory`)."""
    parts = [condition, re.sub(r"[^A-Za-z0-9._-]+", "-", model_name).strip("-") or "model"]
    if condition == "bounded_memory":
        if chars_per_session is not None:
            parts.append(f"C{chars_per_session}")
        elif notes_budget_chars is not None:
            parts.append(f"B{notes_budget_chars}")
        if memory != "notes":
            parts.append(memory)
    return "__".join(parts)


def write_run_outputs(
    output_dir: Path,
    run_name: str,
    frame: pd.DataFrame,
    trajectories: list[dict[str, Any]],
    manifest: dict[str, Any],
) -> dict[str, Path]:
    """Write `<run_name>.csv`, `.trajectories.jsonl` and `.manifest.json`, each whole or not at all;
    return their paths."""
    output_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "csv": output_dir / f"{run_name}.csv",
        "trajectories": output_dir / f"{run_name}.trajectories.jsonl",
        "manifest": output_dir / f"{run_name}.manifest.json",
    }
    write_text_atomic(paths["csv"], redacted_frame(frame).to_csv(index=False))
    lines = [json.dumps(redact_json(trajectory), ensure_ascii=False) + "\n" for trajectory in trajectories]
    write_text_atomic(paths["trajectories"], "".join(lines))
    manifest = portable_paths(
        redact_json(
            {**manifest, "run_name": run_name, "files": {key: path.name for key, path in paths.items()}}
        )
    )
    manifest = keep_live_run(paths["manifest"], manifest)
    write_text_atomic(paths["manifest"], json.dumps(manifest, indent=2, default=str) + "\n")
    return paths


# what a live run measured about itself: kept under `live_run` when a replay rewrites its manifest
LIVE_MANIFEST_KEYS = (
    "git",
    "started_at",
    "finished_at",
    "wall_s",
    "cache",
    "model_stats",
    "concurrency",
    "provenance",
)
LIVE_TOTALS = ("cached_calls", "uncached_prompt_tokens", "uncached_completion_tokens", "model_latency_s")


def live_run_record(manifest: dict[str, Any]) -> dict[str, Any]:
    """What the live run behind a manifest measured about itself (its `live_run` once split off)."""
    if "live_run" in manifest:
        return manifest["live_run"]
    live = {key: manifest[key] for key in LIVE_MANIFEST_KEYS if key in manifest}
    totals = manifest.get("totals") or {}
    live["totals"] = {key: totals[key] for key in LIVE_TOTALS if key in totals}
    return live


def live_measurements(manifest: dict[str, Any]) -> dict[str, Any]:
    """Wall time and calls found cached as the live run measured them (a replay's own are ~0 and all)."""
    live = live_run_record(manifest)
    return {
        "wall_s": live.get("wall_s"),
        "totals": {**(manifest.get("totals") or {}), **(live.get("totals") or {})},
    }


def _same_run(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return old.get("config") == new.get("config") and (old.get("episodes") or {}).get("episode_ids") == (
        new.get("episodes") or {}
    ).get("episode_ids")


def keep_live_run(path: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A run that made no live call (a replay) never overwrites the live measurements of the same run:
    the manifest already at `path` (same configuration, same questions) hands them on as `live_run`."""
    if (manifest.get("provenance") or {}).get("live_calls", 1) or not path.exists():
        return manifest
    try:
        existing = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return manifest
    if not _same_run(existing, manifest):
        return manifest
    return {**manifest, "live_run": live_run_record(existing)}


def redacted_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every text cell redacted of URL credentials and API keys (error columns echo them)."""
    text_columns = [column for column in frame.columns if frame[column].dtype == object]
    if not text_columns:
        return frame
    redacted = frame.copy()
    for column in text_columns:
        redacted[column] = [
            redact_credentials(value) if isinstance(value, str) else value for value in redacted[column]
        ]
    return redacted


def read_trajectories(path: str | Path) -> list[dict[str, Any]]:
    """Load a `<run_name>.trajectories.jsonl` file."""
    with Path(path).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def package_versions(names: Iterable[str] = KEY_PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine_facts() -> dict[str, str | None]:
    """The CPU a run used and the vector instructions torch's kernels chose on it. Float results of
    the same code differ between instruction sets (a CPU retrain of a registered run diverged at its
    8th rollout on an AVX512 machine), so a claim that a run reproduces names them."""
    torch = sys.modules.get("torch")  # only when this process already runs torch: no import for API runs
    return {
        "cpu": cpu_features.cpu_model_name(cpu_features.read_cpuinfo()) or platform.processor() or None,
        "machine": platform.machine() or None,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability() if torch is not None else None,
    }


def _model_stats(model: Any) -> dict[str, Any] | None:
    """`model.stats()` when the backend keeps counters (CachedChatModel: cache hits/misses/entries)."""
    stats = getattr(model, "stats", None)
    if not callable(stats):
        return None
    try:
        return dict(stats())
    except Exception as error:  # a manifest must never sink a finished run
        return {"error": f"{type(error).__name__}: {error}"}


def model_stats_snapshot(model: Any) -> dict[str, Any]:
    """The counters of a model (and its cache) before a run, so its manifest shows that run's own."""
    return {"cache": _model_stats(model) if hasattr(model, "cache") else None,
            "model": _model_stats(getattr(model, "inner", model))}  # fmt: skip


NOT_PER_RUN = frozenset({"entries"})  # the cache file's size, not a count of this run's lookups


def per_run(after: Any, before: Any) -> Any:
    """`after` minus `before` for every counter (recursively), so a model used by several runs
    reports each run's own calls, retries, tokens and cache hits; anything else as `after`."""
    if isinstance(after, dict) and isinstance(before, dict):
        delta = {
            key: value if key in NOT_PER_RUN else per_run(value, before.get(key))
            for key, value in after.items()
        }
        if "hits" in delta and "misses" in delta:
            lookups = delta["hits"] + delta["misses"]
            delta["hit_rate"] = delta["hits"] / lookups if lookups else 0.0
        return delta
    numbers = (int, float)
    if isinstance(after, numbers) and isinstance(before, numbers) and not isinstance(after, bool):
        return after - before
    return after


def backpressure_warnings(
    model_name: str, model_stats: dict[str, Any] | None, concurrency: dict[str, Any] | None
) -> list[str]:
    """Retries, timeouts and a concurrency lowered to what the server offers: latencies include waiting."""
    stats, limits = model_stats or {}, concurrency or {}
    warnings = []
    if stats.get("retries"):
        warnings.append(
            f"model {model_name}: {stats['retries']} retries this run ({stats.get('timeouts', 0)} after a timeout, "
            f"{stats.get('dropped_connections', 0)} after a dropped connection, "
            f"{stats.get('refused_connections', 0)} after a refused one, "
            f"{stats.get('tls_errors', 0)} after a TLS error, {stats.get('transport_errors', 0)} after another "
            "transport error, "
            f"{limits.get('rate_limited_attempts', 0)} after a 429; concurrency lowest {limits.get('lowest')}): "
            "latencies include waiting; a server that queues requests needs fewer in flight or a longer timeout_s"
        )
    slots, requested = limits.get("server_slots"), limits.get("requested")
    if slots and requested and slots < requested:
        warnings.append(
            f"model {model_name}: the server serves {slots} request(s) at once (GET /props total_slots), "
            f"so {slots} ran at a time instead of the {requested} asked for"
        )
    return warnings


def run_warnings(model_name: str, rows: list[dict[str, Any]], totals: dict[str, Any]) -> list[str]:
    """One line per problem a reader of the results must know about (empty when none)."""
    warnings = []
    failed = [row for row in rows if row["failed"]]
    if failed:
        warnings.append(
            f"model {model_name}: {len(failed)} of {len(rows)} questions failed (neither right nor wrong: left "
            "out of every accuracy and paired comparison, and the tables say incomplete; see the 'error' "
            f"column; first: {failed[0]['episode_id']}: {one_line(failed[0]['error'], 200)}); "
            "re-run the same command to finish: the response cache retries only those"
        )
    if totals["cut_calls"] or totals["empty_replies"]:
        warnings.append(
            f"model {model_name}: {totals['cut_calls']} of {totals['calls']} calls were cut at the token limit "
            f"(finish_reason 'length') and {totals['empty_replies']} replies were empty, so notes or answers "
            "are incomplete: raise max_tokens_notes / max_tokens_answer (reasoning models: reasoning_token_floor)"
        )
    return warnings


def cache_warnings(model: Any) -> list[str]:
    """A response cache that was damaged mid-run and bypassed (`on_damage="run_uncached"`)."""
    disabled = getattr(model, "disabled", None)
    if not disabled:
        return []
    return [
        f"the response cache was damaged mid-run and {getattr(model, 'bypassed', 0)} calls were made "
        f"without it (on_damage=run_uncached), so a re-run pays for them again: {disabled}"
    ]


def run_totals(
    rows: list[dict[str, Any]], trajectories: list[dict[str, Any]], judge_tallies: dict[str, int]
) -> dict[str, Any]:
    """Calls, tokens (all, and those paid for: not from the cache), failures and judge calls of one run."""
    fresh = [turn for trajectory in trajectories for turn in trajectory["turns"] if not turn["cached"]]
    return {
        "questions": len(rows),
        "calls": sum(row["n_calls"] for row in rows),
        "cached_calls": sum(row["cached_calls"] for row in rows),
        "prompt_tokens": sum(row["prompt_tokens"] for row in rows),
        "completion_tokens": sum(row["completion_tokens"] for row in rows),
        "uncached_prompt_tokens": sum(turn["prompt_tokens"] for turn in fresh),
        "uncached_completion_tokens": sum(turn["completion_tokens"] for turn in fresh),
        "model_latency_s": round(sum(row["latency_s"] for row in rows), 6),
        "errors": sum(1 for row in rows if row["error"]),
        "failed_questions": sum(1 for row in rows if row["failed"]),
        "cut_calls": sum(row["cut_calls"] for row in rows),
        "empty_replies": sum(row["empty_replies"] for row in rows),
        "judge_calls": judge_tallies.get("judge_calls", 0),
        "judge_cached_calls": judge_tallies.get("judge_cached_calls", 0),
        "judge_prompt_tokens": judge_tallies.get("judge_prompt_tokens", 0),
        "judge_completion_tokens": judge_tallies.get("judge_completion_tokens", 0),
    }


def list_price_usd(model: Any, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What the calls cost at OpenAI's list prices, for a model served by OpenAI itself; else None
    (a local model that happens to be named gpt-4o-mini costs nothing of the kind)."""
    inner = getattr(model, "inner", model)
    cost = getattr(inner, "cost_usd", None)
    return cost(prompt_tokens, completion_tokens) if callable(cost) else None


def build_manifest(
    config: dict[str, Any],
    model: ChatModel,
    judge: Any,
    rows: list[dict[str, Any]],
    trajectories: list[dict[str, Any]],
    judge_tallies: dict[str, int],
    episodes: list[Episode],
    *,
    started_at: str,
    wall_s: float,
    concurrency: dict[str, Any] | None = None,
    stats_before: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What produced a run and what it cost: enough to audit or redo it.

    `warnings` lists, in one line each, what a reader of the results must know: failed
    questions (retried on the next run) and replies cut at the token limit or empty.
    """
    totals = run_totals(rows, trajectories, judge_tallies)
    fresh_prompt, fresh_completion = totals["uncached_prompt_tokens"], totals["uncached_completion_tokens"]
    judge_model = getattr(judge, "model", None)
    judge_name = getattr(judge_model, "name", None)
    model_cost = list_price_usd(model, fresh_prompt, fresh_completion)
    judge_cost = (
        list_price_usd(judge_model, totals["judge_prompt_tokens"], totals["judge_completion_tokens"])
        if judge_model is not None
        else None
    )
    completed = [row for row in rows if not row["failed"]]
    before = stats_before or {}
    model_stats = per_run(_model_stats(getattr(model, "inner", model)), before.get("model"))
    cache_stats = per_run(_cache_stats(model), before.get("cache")) if hasattr(model, "cache") else None
    return {
        "config": config,
        "config_sha256": config_sha256(config),
        "condition": config["condition"],
        "model": {"name": model.name, "class": type(model).__name__},
        "judge": {"name": judge_name, "class": type(judge_model).__name__} if judge is not None else None,
        "episodes": {
            "n": len(episodes),
            "sources": sorted({episode.source for episode in episodes}),
            "episode_ids": [episode.episode_id for episode in episodes],
        },
        "seed": config["seed"],
        "git": git_state(),
        "provenance": call_provenance(trajectories),
        "packages": package_versions(),
        "machine": machine_facts(),
        "started_at": started_at,
        "finished_at": now_utc(),
        "wall_s": round(wall_s, 3),
        "cache": cache_stats,
        "model_stats": model_stats,
        "totals": totals,
        "failed_episode_ids": [row["episode_id"] for row in rows if row["failed"]],
        "concurrency": concurrency,
        "warnings": run_warnings(model.name, rows, totals)
        + cache_warnings(model)
        + backpressure_warnings(model.name, model_stats, concurrency),
        "accuracy": {
            "matcher": sum(row["verdict"] == "correct" for row in rows) / len(rows),
            "matcher_completed_only": (
                sum(row["verdict"] == "correct" for row in completed) / len(completed) if completed else None
            ),
            "judge": (
                sum(bool(row["judge_correct"]) for row in rows) / len(rows) if judge is not None else None
            ),
        },
        "cost_usd_estimate": {
            "model": model_cost,
            "judge": judge_cost,
            "note": "list prices; uncached calls",
        },
    }


def call_provenance(trajectories: list[dict[str, Any]]) -> dict[str, Any]:
    """How many calls (and final answers) were made live by this run vs replayed from recorded
    responses, and which commits made the replayed ones."""
    turns = [turn for trajectory in trajectories for turn in trajectory["turns"]]
    answers = [trajectory["turns"][-1] for trajectory in trajectories if trajectory["turns"]]
    return {
        "live_calls": sum(1 for turn in turns if not turn["cached"]),
        "replayed_calls": sum(1 for turn in turns if turn["cached"]),
        "live_answers": sum(1 for turn in answers if not turn["cached"]),
        "replayed_answers": sum(1 for turn in answers if turn["cached"]),
        "replayed_from_commits": sorted(
            {turn.get("made_by_commit") or "unknown" for turn in turns if turn["cached"]}
        ),
    }


def portable_path(path: str | Path) -> str:
    """A path as committed results may show it: relative to the repository, or `~/...`, never absolute."""
    resolved = Path(path).expanduser().resolve()
    for root, shown in PORTABLE_ROOTS:
        if resolved.is_relative_to(root):
            return shown + resolved.relative_to(root).as_posix()
    return resolved.name


def _cache_stats(model: Any) -> dict[str, Any] | None:
    """The cache's counters, its file named portably (wherever it lies)."""
    stats = _model_stats(model)
    if stats is None or "path" not in stats:
        return stats
    return {**stats, "path": portable_path(stats["path"])}


def portable_paths(value: Any) -> Any:
    """`value` (JSON-like) with every absolute path string under the repository or home made portable."""
    if isinstance(value, dict):
        return {key: portable_paths(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [portable_paths(item) for item in value]
    if isinstance(value, Path) or (isinstance(value, str) and _ABSOLUTE_LOCAL_PATH.match(value)):
        return portable_path(value)
    return value


_ABSOLUTE_LOCAL_PATH = re.compile(
    "^(" + "|".join(re.escape(str(root)) for root, _ in PORTABLE_ROOTS) + ")(/|$)"
)
