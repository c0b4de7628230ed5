"""Diagnose any OpenAI-compatible model: Table 1 (full context vs bounded memory) on one page.

    python -m supersede_lib diagnose --base-url http://localhost:8000/v1 --model my-model
    python -m supersede_lib diagnose --base-url https://api.openai.com/v1 --model gpt-4.1-mini \\
        --api-key-env OPENAI_API_KEY --data longmemeval --n 78 --estimate-only
    python -m supersede_lib diagnose --base-url http://localhost:8000/v1 --model my-model --memory all

The key is read from the environment variable named by --api-key-env and sent as a Bearer token;
it is never written. Results, the response cache (a stopped run resumes) and DIAGNOSIS.md go to
--out/<diagnose-model>/02_isolation/ (--suite robustness: 09_robustness/). docs/diagnose.md says
what it costs and writes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import diagnosis, profiles
from supersede_lib.agent.memory import MEMORY_POLICIES
from supersede_lib.agent.settings import DEFAULT_MAX_TOKENS_ANSWER, DEFAULT_ROLLOUT
from supersede_lib.data.episodes import load_episodes
from supersede_lib.data.longmemeval import DataUnavailableError
from supersede_lib.eval.run_files import now_utc
from supersede_lib.models.chat import ChatModel, ModelError
from supersede_lib.results.headings import NOTEBOOK_ISOLATION, NOTEBOOK_ROBUSTNESS
from supersede_lib.results.outputs import StudyFailedError
from supersede_lib.studies import isolation, memory_systems, robustness

DEFAULT_OUT = (
    profiles.REPO_ROOT / "outputs" / "diagnose"
)  # git-ignored: a diagnosis is yours, not the record's


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m supersede_lib diagnose",
        description=__doc__.splitlines()[0],
        epilog="\n".join(__doc__.splitlines()[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base-url", required=True, help="the endpoint, ending in /v1")
    parser.add_argument("--model", required=True, help="the model name the endpoint serves")
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="variable holding the key (local: none needed)"
    )
    parser.add_argument(
        "--data",
        default="synthetic",
        help="synthetic (default, no download), longmemeval, or a local LongMemEval JSON file",
    )
    _add_study_arguments(parser)
    parser.add_argument("--n", type=int, default=20, help="questions (default 20; with robustness: pairs)")
    parser.add_argument(
        "--difficulty", default="medium", help="synthetic preset: easy, medium, hard, ... (default medium)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=diagnosis.SYNTHETIC_SEED,
        help=f"synthetic questions' generator seed (default {diagnosis.SYNTHETIC_SEED}): another draws other "
        "questions of the same kind",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=DEFAULT_ROLLOUT.notes_budget_chars,
        help=f"notes budget B in characters (default {DEFAULT_ROLLOUT.notes_budget_chars}, the paper's)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=None, help="questions in flight (default 1 local, 8 remote)"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds one call may take before it is retried (default 120)",
    )
    parser.add_argument(
        "--max-tokens-notes",
        type=int,
        default=None,
        help="token cap of a notes reply (default: about B/3 plus a margin); raise it when notes are cut",
    )
    parser.add_argument(
        "--max-tokens-answer",
        type=int,
        default=None,
        help=f"token cap of an answer (default {DEFAULT_MAX_TOKENS_ANSWER}); raise it when answers are cut",
    )
    parser.add_argument(
        "--seconds-per-call",
        type=float,
        default=None,
        help="seconds one call takes, for the time estimate (default: measured, from the response cache "
        "or one timed call before the run)",
    )
    parser.add_argument(
        "--estimate-only",
        action="store_true",
        help="print the estimate and make no call (time: the cache's, else assumed)",
    )
    parser.add_argument(
        "--cache-namespace",
        default=None,
        metavar="NAME",
        help="share cached replies on purpose with every run under NAME (e.g. one model behind two URLs); "
        "default: replies are keyed on the endpoint and the model it reports serving",
    )
    return parser


def _add_study_arguments(parser: argparse.ArgumentParser) -> None:
    """What the diagnosis asks besides Table 1: a suite (`--suite`) or memory policies (`--memory`);
    the profile refuses the two together (`diagnosis.diagnosis_profile`)."""
    parser.add_argument(
        "--suite",
        choices=diagnosis.SUITES,
        default="isolation",
        help="isolation (default: Table 1) or robustness (the perturbation suite of notebook 09: every "
        "question also asked as each perturbation's twin, the paired drop per perturbation)",
    )
    parser.add_argument(
        "--memory",
        action="append",
        default=[],
        metavar="POLICY",
        help="also run the same questions through this memory policy, beside the notes: "
        f"{', '.join(MEMORY_POLICIES)}, a comma list, or `all` (repeatable; not with --suite robustness); "
        "the page gets a policy table and the estimate counts each policy's calls, measured on one probe "
        "question",
    )


def _profile(args: argparse.Namespace) -> profiles.Profile:
    return diagnosis.diagnosis_profile(
        base_url=args.base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        episodes=diagnosis.episodes_block(args.data, args.n, args.difficulty, args.seed),
        notes_budget_chars=args.budget,
        concurrency=args.concurrency,
        timeout_s=args.timeout,
        max_tokens_notes=args.max_tokens_notes,
        max_tokens_answer=args.max_tokens_answer,
        cache_namespace=args.cache_namespace,
        memory_policies=diagnosis.memory_policy_names(args.memory),
        suite=args.suite,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    profiles.OUTPUT_ROOT = args.out  # this process's results folder (the studies write under it)
    try:
        profile = _profile(args)
        planned = diagnosis.estimate(profile, args.seconds_per_call)
    except (profiles.ProfileError, ValueError, DataUnavailableError) as error:
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2
    if args.estimate_only:  # writes nothing: no need to hold the folder
        return _estimate_and_run(args, profile, planned)
    try:  # one run at a time per folder, held before the probe's first call
        with diagnosis.folder_lock(profiles.output_dir(profile, SUITE_STEPS[args.suite][0])):
            return _estimate_and_run(args, profile, planned)
    except diagnosis.FolderInUseError as error:
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2


def _estimate_and_run(
    args: argparse.Namespace, profile: profiles.Profile, planned: diagnosis.Estimate
) -> int:
    model = None
    try:
        if not args.estimate_only:  # one model for the probe calls and the run: one probe of its server
            model = profiles.model_for(profile.model, profile)
        if args.seconds_per_call is None:  # the cache's latencies; a run also times one real call
            planned = diagnosis.measured(planned, profile, probe=not args.estimate_only, model=model)
        if args.estimate_only:  # each --memory policy's calls: measured by a probe question in a run
            planned = diagnosis.unprobed_policies(planned, profile)
        else:
            planned = diagnosis.probed_policies(planned, profile, model)
    except ModelError as error:
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2
    print(f"estimate: {planned.line()}")
    if args.estimate_only:
        return 0
    return run_and_report(profile, planned, args.suite, model)


# per suite: its folder, its run-and-analyse step, its write step, its page, its incomplete line
SUITE_STEPS: dict[str, tuple[str, Callable, Callable, Callable, Callable]] = {
    "isolation": (
        NOTEBOOK_ISOLATION,
        lambda profile, model: isolation.analyse_isolation(
            profile, isolation.run_isolation_conditions(profile, model=model)
        ),
        isolation.write_isolation,
        diagnosis.write_diagnosis,
        lambda result: diagnosis.incomplete_line(result.comparison),
    ),
    "robustness": (
        NOTEBOOK_ROBUSTNESS,
        lambda profile, _model: robustness.analyse_robustness(
            profile, robustness.run_robustness_models(profile)
        ),
        robustness.write_robustness,
        diagnosis.write_robustness_diagnosis,
        diagnosis.robustness_incomplete_line,
    ),
}


def run_and_report(
    profile: profiles.Profile,
    planned: diagnosis.Estimate,
    suite: str = "isolation",
    model: ChatModel | None = None,
) -> int:
    """Run the diagnosis (Table 1, or with `suite="robustness"` the perturbation suite of notebook 09)
    and write its page: 0 complete, 1 incomplete (questions failed: re-run the same command to
    finish), 2 stopped (a setting wrong for every call). `model`: the one the probe used (isolation).

    An earlier page in the folder is marked outdated first, so a run that stops or dies never
    leaves it looking like the result of the files beside it.
    """
    notebook, run, write, page, incomplete_of = SUITE_STEPS[suite]
    directory = profiles.output_dir(profile, notebook)
    started = f"A later run (n = {planned.questions}, started {now_utc()})"
    diagnosis.mark_outdated(directory, f"{started} has not finished.")
    try:
        result = run(profile, model)
    except ModelError as error:
        diagnosis.mark_outdated(directory, f"{started} stopped: {error}")
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2
    try:
        write(result)
    except StudyFailedError as error:  # every question of a condition failed: the page says so too
        print(f"FAILED: {error}", file=sys.stderr)
    try:  # `--memory` (the isolation suite only: the profile refuses it with another suite)
        policies = run_policies(profile, directory, model)
    except ModelError as error:
        diagnosis.mark_outdated(directory, f"{started} stopped: {error}")
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2
    report = page(result, planned, *policies)
    print(report.read_text(encoding="utf-8"))
    print(f"report: {report}")
    incomplete = incomplete_of(result)
    if incomplete:
        print(incomplete.removeprefix("> ").replace("**", ""), file=sys.stderr)
        return 1
    return 0


def run_policies(
    profile: profiles.Profile, directory: Path, model: ChatModel | None
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]] | tuple[()]:
    """`--memory`: the same questions through each policy and the notes (the reference, from the
    cache), in the diagnosis folder; the page's policy table and the runs' manifests, or nothing
    without the block (so a suite's page gets only what it takes)."""
    block = profile.memory_systems
    if block is None:
        return ()
    episodes = load_episodes(block.episodes)
    model = model if model is not None else profiles.model_for(profile.model, profile)
    runs = memory_systems.run_model_policies(profile, episodes, model, directory=directory)
    tables = memory_systems.analyse_policy_runs(runs, block.reference_entry.name)
    manifests = {found.run.run_name: found.run.manifest for found in runs if found.run is not None}
    return memory_systems.shown_table(tables), manifests
