"""Optimise the memory-writing instruction of any served model with GEPA, then test it on held-out episodes.

    python -m supersede_lib optimise-instruction --base-url http://localhost:8080/v1 --model qwen-0.5b \\
        --reflection-base-url http://localhost:8081/v1 --reflection-model qwen-1.5b --budget 160

GEPA (the `gepa` package) rewrites the system text of the notes-writing call, evaluating candidates on
synthetic selection episodes (seed 7301: the first 20 validate, the rest train) with every call going
through the runner and the response cache; a stopped run resumes when the same command is run again.
Then the original and the optimised instruction answer the same held-out episodes (another seed; never
the registered test set, seed 7401) and REPORT.md + report.json say how they compare. Results go to
--out/diagnose-<model>/optimise_instruction/. docs/instruction.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from supersede_lib import diagnosis, profiles
from supersede_lib.agent.settings import PAPER_NOTES_BUDGET_CHARS
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.runner import RunSettings
from supersede_lib.instruction import MAX_INSTRUCTION_CHARS, optimise_instruction
from supersede_lib.instruction.optimise import VALIDATION_EPISODES
from supersede_lib.instruction.report import compare_held_out
from supersede_lib.models.chat import ChatModel, ModelError

DEFAULT_OUT = profiles.REPO_ROOT / "outputs" / "diagnose"  # git-ignored, as `diagnose`'s pages
FOLDER = "optimise_instruction"
SELECTION_SEED = 7301  # the registered selection set (development only)
TEST_SEED = 7401  # the registered test set: never shown to an optimisation, nor used as held-out here
HELD_OUT_SEED = 7501
REGISTERED_VARIANT = "v12_line_edits_times_kept"  # the registered agent of the CPU proof


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m supersede_lib optimise-instruction",
        description=__doc__.splitlines()[0],
        epilog="\n".join(__doc__.splitlines()[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base-url", required=True, help="the task model's endpoint, ending in /v1")
    parser.add_argument("--model", required=True, help="the task model's name at that endpoint")
    parser.add_argument(
        "--reflection-base-url", default=None, help="the reflection model's endpoint (default --base-url)"
    )
    parser.add_argument(
        "--reflection-model", default=None, help="the reflection model's name (default --model)"
    )
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="variable holding the key (local: none needed)"
    )
    parser.add_argument(
        "--budget", type=int, default=160, help="GEPA's max_metric_calls: episodes judged (default 160)"
    )
    parser.add_argument("--n", type=int, default=100, help="selection episodes (default 100)")
    parser.add_argument(
        "--validation",
        type=int,
        default=VALIDATION_EPISODES,
        help="of them, the first N validate (default 20)",
    )
    parser.add_argument(
        "--held-out-n", type=int, default=100, help="held-out episodes for the report (default 100)"
    )
    parser.add_argument(
        "--held-out-seed",
        type=int,
        default=HELD_OUT_SEED,
        help=f"their seed (default {HELD_OUT_SEED}; not {TEST_SEED})",
    )
    parser.add_argument("--difficulty", default="easy", help="synthetic preset of both sets (default easy)")
    parser.add_argument(
        "--prompt-variant",
        default=REGISTERED_VARIANT,
        help=f"the agent whose instruction starts (default {REGISTERED_VARIANT})",
    )
    parser.add_argument(
        "--instruction",
        type=Path,
        default=None,
        help="a text file whose content starts the search instead of the variant's notes system text",
    )
    parser.add_argument(
        "--notes-budget", type=int, default=PAPER_NOTES_BUDGET_CHARS, help="notes budget B (default 300)"
    )
    parser.add_argument(
        "--max-tokens-notes", type=int, default=None, help="token cap of a notes reply (default ~B/3)"
    )
    parser.add_argument(
        "--max-tokens-answer", type=int, default=None, help="token cap of an answer (default 64)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=None, help="questions in flight (default 1 local, 8 remote)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds one call may take (default 120)")
    parser.add_argument("--seed", type=int, default=0, help="GEPA's seed (default 0)")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})"
    )
    return parser


def read_instruction(path: Path | None) -> str | None:
    """The starting instruction of `--instruction`, checked: a ValueError names the file and what is wrong."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"--instruction {path}: cannot read it ({error})") from None
    if not text:
        raise ValueError(f"--instruction {path}: the file is empty")
    if len(text) > MAX_INSTRUCTION_CHARS:
        raise ValueError(
            f"--instruction {path}: {len(text)} characters, over the limit of {MAX_INSTRUCTION_CHARS}"
        )
    return text


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse, before any call, what cannot give a fair report (a ValueError naming the option)."""
    if args.held_out_seed in (TEST_SEED, SELECTION_SEED):
        raise ValueError(
            f"--held-out-seed {args.held_out_seed}: that is the registered "
            f"{'test' if args.held_out_seed == TEST_SEED else 'selection'} set; choose another seed"
        )
    for option in ("budget", "n", "held_out_n"):
        if getattr(args, option) < 1:
            raise ValueError(f"--{option.replace('_', '-')} {getattr(args, option)}: give a positive number")
    if not 0 < args.validation < args.n:
        raise ValueError(f"--validation {args.validation}: must be between 1 and --n - 1 ({args.n - 1})")


def _episodes(args: argparse.Namespace, seed: int, n: int) -> dict:
    return {"source": "synthetic", "n": n, "difficulty": args.difficulty, "seed": seed, "n_sessions": [2, 3]}


def _model(args: argparse.Namespace, base_url: str, name: str) -> tuple[profiles.Profile, ChatModel]:
    profile = diagnosis.diagnosis_profile(
        base_url=base_url,
        model=name,
        api_key_env=args.api_key_env,
        episodes=_episodes(args, SELECTION_SEED, args.n),
        concurrency=args.concurrency,
        timeout_s=args.timeout,
    )
    return profile, profiles.model_for(profile.model, profile)


def _settings(args: argparse.Namespace, profile: profiles.Profile) -> RunSettings:
    changes = {
        "prompt_variant": args.prompt_variant,
        "notes_budget_chars": args.notes_budget,
        "notes_system": read_instruction(args.instruction),
    }
    caps = {"max_tokens_notes": args.max_tokens_notes, "max_tokens_answer": args.max_tokens_answer}
    return profile.run_settings(**changes, **{key: value for key, value in caps.items() if value is not None})


def run(args: argparse.Namespace) -> int:
    """Optimise, compare on held-out episodes, print the page: 0 done, 1 held-out episodes failed."""
    profile, task_model = _model(args, args.base_url, args.model)
    settings = _settings(args, profile)
    _, reflection_model = _model(
        args, args.reflection_base_url or args.base_url, args.reflection_model or args.model
    )
    folder = profiles.output_dir(profile, FOLDER)
    selection = load_episodes(_episodes(args, SELECTION_SEED, args.n))
    optimisation = optimise_instruction(
        task_model,
        reflection_model,
        selection,
        settings,
        folder / f"gepa_budget-{args.budget}_seed-{args.seed}",
        max_metric_calls=args.budget,
        validation_n=args.validation,
        seed=args.seed,
    )
    about = {
        "task model": f"{args.model} at {args.base_url}",
        "reflection model": f"{args.reflection_model or args.model} at {args.reflection_base_url or args.base_url}",
        "agent": f"{settings.prompt_variant}, notes budget {settings.notes_budget_chars} characters",
        "selection set": f"synthetic {args.difficulty}, seed {SELECTION_SEED}, n = {args.n} "
        f"(first {args.validation} validate)",
        "held-out set": f"synthetic {args.difficulty}, seed {args.held_out_seed}, n = {args.held_out_n}",
        "budget": f"{args.budget} metric calls, GEPA seed {args.seed}",
    }
    held_out = load_episodes(_episodes(args, args.held_out_seed, args.held_out_n))
    report = compare_held_out(task_model, held_out, settings, optimisation, folder, about=about)
    print(report.markdown_path.read_text(encoding="utf-8"))
    print(f"report: {report.markdown_path}")
    failed = sum(report.data["arms"][arm]["failed"] for arm in report.data["arms"])
    if failed:
        print(
            f"incomplete: {failed} held-out episodes failed; run the same command again to retry them",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    profiles.OUTPUT_ROOT = args.out  # this process's results folder
    try:
        check_arguments(args)
        return run(args)
    except (profiles.ProfileError, ValueError, ModelError) as error:
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2
