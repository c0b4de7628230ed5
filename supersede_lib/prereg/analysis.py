"""The registered analysis of a pre-registered proof (`preregistration:` in its profile).

Everything here reads the per-model files the runs wrote (`07_transfer_eval/<set>/<label>.csv`, the
copied training logs in `06_grpo_training/`) and applies the tests the profile registered: the primary
arm against the format-controlled base on the test set, paired by episode; the secondary comparisons
Holm-adjusted; the hard set with its intervals and cut rate; the real records as a sanity row; the
training trend with each step's episode counted once. Pieces not run yet are simply absent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.eval.stats import (
    holm_adjusted,
    paired_bootstrap_diff,
    paired_mcnemar,
    quarter_steps,
    step_success_trend,
    wilson_interval,
)
from supersede_lib.profiles import Profile, ProfileError
from supersede_lib.results import evidence
from supersede_lib.results.comparison import failed_mask
from supersede_lib.results.headings import NOTEBOOK_TRAINING
from supersede_lib.results.outputs import markdown_table
from supersede_lib.studies.evaluation_sets import BASE, set_folder

FINAL_STEP = 20  # the stopping rule: every run's final checkpoint
_ORDER_ITEM = re.compile(r"^\s*(?P<arm>[A-Za-z0-9_-]+)\s+s(?P<seed>\d+)\s*$")
CONTROLS = {
    "base": ("test", BASE),
    "format-controlled base": ("test-format-controlled", BASE),
    "full context (untrained base)": ("test-full-context", BASE),
}
HARD_SET, REAL_RECORDS_SET = "hard", "longmemeval"
_SHARES = {"success": "success", "stale": "stale", "empty notes": "notes_empty"}  # trend: name -> column


def registered_order(profile: Profile) -> list[tuple[str, int]]:
    """The (arm, seed) runs in `preregistration.order` ("verdict s11, format s11, ...")."""
    order = profile.require("preregistration").order
    runs = []
    for item in order.split(","):
        match = _ORDER_ITEM.match(item)
        if match is None:
            raise ProfileError(
                f"{profile.source}: preregistration.order: {item.strip()!r} is not '<arm> s<seed>'"
            )
        runs.append((match["arm"], int(match["seed"])))
    return runs


def final_label(arm: str, seed: int) -> str:
    return f"{arm}__seed-{seed}__step-{FINAL_STEP}"


def _piece(profile: Profile, set_name: str, label: str, suffix: str) -> Path | None:
    """One model's file on one set (`.csv`, `.trajectories.jsonl`, `.manifest.json`); None when the
    profile has no such set or the model has not run there."""
    evaluations = {item.name: item for item in profile.require("transfer").evaluations}
    if set_name not in evaluations:
        return None
    path = set_folder(profile, evaluations[set_name]) / f"{label}{suffix}"
    return path if path.exists() else None


def _set_rows(profile: Profile, set_name: str, label: str) -> pd.DataFrame | None:
    """One model's rows on one set, indexed by episode (None when it has not run); a question the
    run failed on is neither right nor wrong, so it is left out here and every paired test drops it."""
    path = _piece(profile, set_name, label, ".csv")
    if path is None:
        return None
    rows = pd.read_csv(path)
    return rows[~failed_mask(rows)].set_index("episode_id")


def _test_set_models(profile: Profile) -> list[tuple[str, str, str]]:
    """(name, set, label) of every model judged on the test set or a variant of it: the controls,
    then each registered run's final checkpoint."""
    models = [(name, *where) for name, where in CONTROLS.items()]
    return models + [
        (final_label(arm, seed), "test", final_label(arm, seed)) for arm, seed in registered_order(profile)
    ]


def _correct(rows: pd.DataFrame) -> pd.Series:
    return rows["verdict"].eq("correct")


def _cut_rate(rows: pd.DataFrame) -> float:
    """The share of model calls whose reply hit the token cap (nan when the file does not count)."""
    if "cut_calls" not in rows or "n_calls" not in rows or rows["n_calls"].sum() == 0:
        return float("nan")
    return float(rows["cut_calls"].sum() / rows["n_calls"].sum())


def _against(arm: pd.Series, control: pd.Series) -> tuple[float, float, float, float]:
    """Exact McNemar p and the bootstrap interval of the paired difference, arm minus control."""
    paired = pd.concat([arm, control], axis=1, join="inner")
    test = paired_mcnemar(paired.iloc[:, 0], paired.iloc[:, 1])
    interval = paired_bootstrap_diff(paired.iloc[:, 0], paired.iloc[:, 1], n_resamples=10_000, seed=0)
    return test.p_exact, interval.diff, interval.low, interval.high


def _holm(rows: list[dict], column: str) -> None:
    """Add `<column> (Holm)`: Holm's adjustment across the table's rows that have `column`."""
    if rows:
        adjusted = holm_adjusted([row[column] for row in rows])
        for row, p_holm in zip(rows, adjusted, strict=True):
            row[f"{column} (Holm)"] = p_holm


def _count_row(model: str, rows: pd.DataFrame) -> dict:
    correct = _correct(rows)
    return _counts(model, int(correct.sum()), len(correct), _cut_rate(rows))


def _counts(model: str, correct: int, n: int, cut_rate: float) -> dict:
    """A model's row of counts: correct of n with its Wilson interval, and the cut rate."""
    low, high = wilson_interval(correct, n)
    return {
        "model": model,
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else float("nan"),
        "95% CI low": low,
        "95% CI high": high,
        "cut rate": cut_rate,
    }


GAP_CLOSED = "share of the untrained full-context gap closed"
P_COLUMN = re.compile(r"(^|[\s:])p( \(.*\))?$")  # "vs base: p", "p (one-sided)", "vs base: p (Holm)"


def printed_p_values(table: pd.DataFrame) -> pd.DataFrame:
    """The table as results.md prints it: four places, p values below 0.0001 as "< 0.0001" (not 0.0)."""
    printed = table.round(4)
    for column in [name for name in table.columns if P_COLUMN.search(str(name))]:
        printed[column] = [
            "—" if pd.isna(value) else "< 0.0001" if value < 0.0001 else f"{value:.4f}"
            for value in table[column]
        ]
    return printed


def kept_adapter_status(profile: Profile, label: str) -> str:
    """Whether the adapter behind a trained number can be loaded again: kept in float16 beside the
    study (`train.kept_adapters`, with its hash), or not kept, which the table then says."""
    record = profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_TRAINING / "adapters" / f"{label}.json"
    if not record.is_file():
        return "not kept: cannot be loaded again"
    kept = json.loads(record.read_text(encoding="utf-8"))
    if kept.get("kept") is False:
        return f"not kept: {kept.get('why', 'see its record')}"
    return f"kept (sha256 {kept['sha256'][:12]})"


def results_table(profile: Profile) -> pd.DataFrame:
    """The registered analysis on the test set: the controls, then every final checkpoint judged so
    far against the format-controlled base (primary) and the base (secondary, Holm-adjusted), with the
    share of the gap between the base's bounded memory and the untrained base's full context that it
    closes. That reference is no ceiling: the untrained model reading every session, with its own
    answer cap, so a share above 1 says the trained agent beat it, not that a limit was reached."""
    controls = {name: _set_rows(profile, *where) for name, where in CONTROLS.items()}
    rows = [_count_row(name, frame) for name, frame in controls.items() if frame is not None]
    base, formatted, full = (None if frame is None else _correct(frame) for frame in controls.values())
    checkpoint_rows = []
    for arm, seed in registered_order(profile):
        judged = _set_rows(profile, "test", final_label(arm, seed))
        if judged is None or base is None or formatted is None:
            continue
        arm_correct = _correct(judged)
        p_format, diff_format, low, high = _against(arm_correct, formatted)
        p_base, diff_base, _, _ = _against(arm_correct, base)
        gap = (
            None
            if full is None or full.mean() == base.mean()
            else (arm_correct.mean() - base.mean()) / (full.mean() - base.mean())
        )
        checkpoint_rows.append(
            {
                **_count_row(final_label(arm, seed), judged),
                "arm": arm,
                "adapter": kept_adapter_status(profile, final_label(arm, seed)),
                "vs format-controlled: diff": diff_format,
                "diff 95% CI low": low,
                "diff 95% CI high": high,
                "vs format-controlled: p (exact McNemar)": p_format,
                "vs base: diff": diff_base,
                "vs base: p": p_base,
                GAP_CLOSED: gap,
            }
        )
    _holm(checkpoint_rows, "vs base: p")
    return pd.DataFrame(rows + checkpoint_rows)


def hard_table(profile: Profile) -> pd.DataFrame:
    """The hard set (transfer): every judged model with its Wilson interval and cut rate, and each
    checkpoint against the base, paired by episode (bootstrap interval, exact McNemar, Holm). Beside
    them, a sensitivity reading: the rows graded by their blind labels where labelled (batch RH)."""
    base = _set_rows(profile, HARD_SET, BASE)
    readings = LabelReadings.load()
    base_read = readings.read(base) if base is not None else None
    base_credit = dict(zip(("labels", "strict labels"), base_read[1:], strict=True)) if base_read else {}
    checkpoint_rows = []
    for arm, seed in registered_order(profile):
        judged = _set_rows(profile, HARD_SET, final_label(arm, seed))
        if judged is None:
            continue
        counts, by_labels, by_strict = readings.read(judged)
        row = {**_count_row(final_label(arm, seed), judged), "arm": arm}
        if base is not None:  # before the base is judged: the checkpoint's count alone, no comparison
            p_base, diff, low, high = _against(_correct(judged), _correct(base))
            row.update(
                {
                    "vs base: diff": diff,
                    "diff 95% CI low": low,
                    "diff 95% CI high": high,
                    "vs base: p": p_base,
                }
            )
        row.update(_label_columns(counts, {"labels": by_labels, "strict labels": by_strict}, base_credit))
        checkpoint_rows.append(row)
    if base is None:
        return _labels_last(pd.DataFrame(checkpoint_rows))
    _holm(checkpoint_rows, "vs base: p")
    base_row = {**_count_row(BASE, base), **_label_columns(base_read[0], {}, {})}
    return _labels_last(pd.DataFrame([base_row, *checkpoint_rows]))


def _labels_last(table: pd.DataFrame) -> pd.DataFrame:
    """The registered columns first, the sensitivity reading by the labels after them."""
    by_labels = [column for column in table if column in LABEL_COUNT_COLUMNS or column.startswith("by ")]
    return table[[column for column in table if column not in by_labels] + by_labels]


LABEL_COUNT_COLUMNS = (
    "labelled",
    "credit agrees",
    "correct (labels where labelled)",
    "correct (strict labels)",
)


def _label_columns(
    counts: dict[str, Any], credit_by: dict[str, pd.Series], base_credit_by: dict[str, pd.Series]
) -> dict[str, Any]:
    """A hard-set row's sensitivity columns: labelled rows, credit agreement, correct by the labels and
    by the strict reading, and (for a checkpoint) the paired test of each reading against the base read
    the same way."""
    columns = {key: counts[key] for key in LABEL_COUNT_COLUMNS}
    if not base_credit_by or not counts["labelled"]:
        return columns
    for reading, credit in credit_by.items():
        p_value, diff, _, _ = _against(credit, base_credit_by[reading])
        columns |= {f"by {reading} vs base: diff": diff, f"by {reading} vs base: p": p_value}
    return columns


def real_records_table(profile: Profile) -> pd.DataFrame:
    """The real LongMemEval records: a sanity row per judged model (n is tiny; it decides nothing)."""
    labels = [BASE, *(final_label(arm, seed) for arm, seed in registered_order(profile))]
    rows = []
    for label in labels:
        judged = _set_rows(profile, REAL_RECORDS_SET, label)
        if judged is not None:
            rows.append(_count_row(label, judged))
        elif (counts := _manifest_counts(profile, REAL_RECORDS_SET, label)) is not None:
            rows.append(counts)
    return pd.DataFrame(rows)


def _manifest_counts(profile: Profile, set_name: str, label: str) -> dict | None:
    """A model's counts from its manifest alone: real-record rows quote LongMemEval and are never
    committed, so a fresh clone has only the manifest (questions, matcher accuracy, cut calls)."""
    path = _piece(profile, set_name, label, ".manifest.json")
    if path is None:
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    totals = manifest["totals"]
    n = int(totals["questions"]) - len(manifest.get("failed_episode_ids", []))  # failed: left out
    accuracy = manifest["accuracy"]
    correct = round(float(accuracy.get("matcher_completed_only", accuracy["matcher"]) or 0.0) * n)
    return _counts(
        label, correct, n, totals["cut_calls"] / totals["calls"] if totals["calls"] else float("nan")
    )


def trend_table(profile: Profile) -> pd.DataFrame:
    """Per registered run copied to 06: the training trend with each step's episode as one cluster
    (one-sided Kendall tau of the per-step success rate on step), and the first and last quarter's
    success, stale and empty-notes shares (where a notes collapse shows)."""
    rollouts = evidence.read_rollouts(profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_TRAINING)
    rows = []
    for run, frame in rollouts.groupby("run", sort=True) if not rollouts.empty else []:
        trend = step_success_trend(frame["step"], frame["success"])
        first, last = (frame[frame["step"].isin(steps)] for steps in quarter_steps(frame["step"]))
        row = {
            "run": run,
            "steps": trend.steps,
            "rollouts": len(frame),
            "kendall tau": trend.tau,
            "p (one-sided)": trend.p_one_sided,
            # the within-group push towards (> 0) or away from (< 0) empty notes early on (collapse)
            "advantage on empty notes, first half": _empty_notes_advantage(frame),
        }
        for quarter, part in (("first", first), ("last", last)):
            row.update({f"{name} {quarter} quarter": part[column].mean() for name, column in _SHARES.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def _empty_notes_advantage(frame: pd.DataFrame) -> float:
    """The summed GRPO advantage of the empty-notes rollouts in the first half of a run's steps."""
    steps = sorted(frame["step"].unique())
    early = frame[frame["step"].isin(steps[: len(steps) // 2])]
    return float(early.loc[early["notes_empty"], "advantage"].sum())


BLIND_LABELS_BEFORE_REPORTING = 150  # amendment 1: trained answers of the registered arms, labelled blind
MIN_CREDIT_AGREEMENT = 0.98  # the matcher's credit agreement on trained answers, before a trained number


def labelled_trained_answers(profile: Profile) -> int:
    """How many labelled answers (supersede_lib/labelling/data/) are this profile's trained arms' answers."""
    from supersede_lib.labelling.agreement import answer_population

    prefix = f"outputs/{profile.name}/"
    return sum(
        1
        for row in _labelled_rows()
        if str(row.get("source", {}).get("file", "")).startswith(prefix)
        and answer_population(row) == "trained adapter"
    )


def _labelled_rows() -> list[dict]:
    from supersede_lib.labelling.agreement import LABELS_DIR, read_labelled_answers

    return read_labelled_answers(LABELS_DIR / "labelled_answers.jsonl")


def human_labels(strict_reading: bool = False) -> dict[tuple[str, str, str], str]:
    """The blind human label of each labelled answer, keyed by (question, first gold form, answer):
    the columns a per-model CSV holds (`question`, `gold`, `answer`). `strict_reading`: the label under the
    literal reading a labeller gave where the batch took another (`strict_label`)."""
    return {
        (row["question"], row["gold_answers"][0], row["answer"]): row.get("strict_label", row["label"])
        if strict_reading
        else row["label"]
        for row in _labelled_rows()
        if row.get("gold_answers")
    }


def _label_of_rows(rows: pd.DataFrame, labels: dict[tuple[str, str, str], str]) -> pd.Series:
    """Each row's human label (None where its answer is not labelled)."""
    if not {"question", "gold", "answer"} <= set(rows.columns):
        return pd.Series(None, index=rows.index, dtype=object)
    keys = zip(rows["question"], rows["gold"], rows["answer"].fillna(""), strict=True)
    return pd.Series([labels.get(key) for key in keys], index=rows.index, dtype=object)


@dataclass(frozen=True)
class LabelReadings:
    """The blind human labels, read two ways (the batch's labels and the strict reading), for grading a
    model's rows beside the matcher."""

    labels: dict[tuple[str, str, str], str]
    strict_labels: dict[tuple[str, str, str], str]

    @classmethod
    def load(cls) -> LabelReadings:
        return cls(human_labels(), human_labels(strict_reading=True))

    def read(self, judged: pd.DataFrame) -> tuple[dict[str, Any], pd.Series, pd.Series]:
        """How many rows carry a label, how the matcher agrees on them (exact verdict and credit), the
        correct counts by the matcher, by the labels and by the strict labels (unlabelled rows by the
        matcher); and the per-row credit by the labels and by the strict labels."""
        human = _label_of_rows(judged, self.labels)
        labelled = human.notna()
        matcher_credit = _correct(judged)
        human_credit = human.eq("correct")
        by_labels = human_credit.where(labelled, matcher_credit)
        by_strict = _label_of_rows(judged, self.strict_labels).eq("correct").where(labelled, matcher_credit)
        counts = {
            "labelled": int(labelled.sum()),
            "verdict agrees": judged["verdict"][labelled].eq(human[labelled]).mean()
            if labelled.any()
            else None,
            "credit agrees": matcher_credit[labelled].eq(human_credit[labelled]).mean()
            if labelled.any()
            else None,
            "correct (matcher)": int(matcher_credit.sum()),
            "correct (labels where labelled)": int(by_labels.sum()),
            "correct (strict labels)": int(by_strict.sum()),
        }
        return counts, by_labels, by_strict


def instrument_table(profile: Profile) -> pd.DataFrame:
    """Per model on the test set: how many answers carry a blind human label, how the matcher agrees
    on them (exact verdict and credit), and the sensitivity row registered before the first trained
    labels were read: accuracy with each labelled answer graded by its label (unlabelled ones by the
    matcher), against the format-controlled base by the same exact McNemar test; and the same under the
    strict labels (a labeller's literal reading where the batch took another)."""
    readings = LabelReadings.load()
    formatted = _set_rows(profile, *CONTROLS["format-controlled base"])
    rows = []
    for name, set_name, label in _test_set_models(profile):
        judged = _set_rows(profile, set_name, label)
        if judged is None:
            continue
        counts, by_labels, by_strict = readings.read(judged)
        row = {"model": name, "n": len(judged), **counts}
        if "__seed-" in name and formatted is not None and counts["labelled"]:
            for reading, credit in (("labels", by_labels), ("strict labels", by_strict)):
                p_value, diff, _, _ = _against(credit, _correct(formatted))
                row.update({f"by {reading} vs format-controlled: diff": diff, f"by {reading}: p": p_value})
        rows.append(row)
    return pd.DataFrame(rows)


def notes_table(profile: Profile) -> pd.DataFrame:
    """Exploratory (added after `format` s11 was read, not registered): what each model's final notes
    held on the test set, apart from what it answered. A policy can keep the current value and still
    answer with something else (the `format` arm answered with its notes key); this separates memory
    from answering. Held under both readings of a notes line keyed to another thing (the keyed-line
    rule of `eval.memory_metrics`): by value (the copied `violin teacher:` key read as noise) and
    literal (only a line that names the asked thing, or has no key)."""
    rows = []
    for name, set_name, label in _test_set_models(profile):
        path = _piece(profile, set_name, label, ".trajectories.jsonl")
        if path is None:
            continue
        frame = pd.read_json(path, lines=True)
        if frame["holds_current"].isna().all():  # full context: no notes
            continue
        current = frame["holds_current"].map(_last_true)
        stale = frame["holds_stale"].map(_last_true)
        current_only = current & ~stale
        correct = frame["verdict"].eq("correct")
        rows.append(
            {
                "model": name,
                "n": len(frame),
                "final notes hold the current value": int(current.sum()),
                "the same, literal reading of the key": int(
                    frame.get("memory", pd.Series(None, index=frame.index)).map(_holds_literally).sum()
                ),
                "hold a stale value": int(stale.sum()),
                "hold the current value only": int(current_only.sum()),
                "correct (matcher)": int(correct.sum()),
                "correct where the notes hold the current value only": int((correct & current_only).sum()),
            }
        )
    return pd.DataFrame(rows)


def _holds_literally(memory: object) -> bool:
    """The final notes' `holds_current_keyed` of one trajectory's memory metrics (absent: false)."""
    return bool(isinstance(memory, dict) and memory.get("holds_current_keyed"))


def _last_true(holdings: object) -> bool:
    """Whether the last entry of a per-session holdings list is true (None or empty: false)."""
    return bool(isinstance(holdings, list) and holdings and holdings[-1])


def reporting_status(profile: Profile, table: pd.DataFrame, instrument: pd.DataFrame | None = None) -> str:
    """Whether the trained rows may be reported yet: amendment 1 asks for 150 blind labels of these
    arms' answers, and the matcher's credit to agree with them on at least `MIN_CREDIT_AGREEMENT`."""
    if "arm" not in table:
        return ""
    labelled = labelled_trained_answers(profile)
    if labelled < BLIND_LABELS_BEFORE_REPORTING:
        return (
            f"**Trained rows not reported yet:** {labelled} of the {BLIND_LABELS_BEFORE_REPORTING} blind labels "
            "of these arms' answers that amendment 1 asks for before a trained number is reported are in; the "
            "rows are the record, not a result."
        )
    trained = instrument[instrument["model"].str.contains("__seed-")] if instrument is not None else None
    if trained is None or trained.empty or trained["labelled"].sum() == 0:
        return f"Instrument check: {labelled} answers of these arms labelled blind (see the labels README)."
    weights = trained["labelled"]
    credit = float((trained["credit agrees"] * weights).sum() / weights.sum())
    verdict = float((trained["verdict agrees"] * weights).sum() / weights.sum())
    measured = (
        f"{labelled} answers of these arms labelled blind; on their {int(weights.sum())} test rows the "
        f"matcher's credit agrees {credit:.1%}, its exact verdict {verdict:.1%}"
    )
    caveat = _disputed_conventions(trained)
    if credit < MIN_CREDIT_AGREEMENT:
        return (
            f"**Trained rows not reported as results:** {measured}, below the {MIN_CREDIT_AGREEMENT:.0%} the "
            "instrument must hold on trained answers; the rows are the record, and the instrument table "
            f"shows them graded by the labels.{caveat}"
        )
    return f"Instrument check: {measured} (see the labels README).{_revised_matcher_caveat()}{caveat}"


def _revised_matcher_caveat() -> str:
    """The matcher crossed the bar in rule rounds after the registered verdict: say so, beside what it
    measured out of sample (every fresh blind batch graded once by this matcher version, each named
    with the kind of trained answers it sampled)."""
    from supersede_lib.eval.matcher import MATCHER_VERSION
    from supersede_lib.labelling.agreement import (
        current_matcher_batches,
        pooled_final_answer_credit,
        read_blind_batches,
    )

    batches = read_blind_batches()
    final_agreed, final_n = pooled_final_answer_credit(batches)
    measured = "; ".join(
        f"{batch.batch} ({batch.answers}) {batch.credit_agrees}/{batch.n} = {batch.credit_share:.1%}, "
        f"{batch.clear_credit_agrees}/{batch.clear_n} = {batch.clear_credit_share:.1%} on the answers its "
        "readers did not call borderline"
        for batch in current_matcher_batches(batches, MATCHER_VERSION)
    )
    pooled = (
        f" Over every fresh batch of greedy final answers, the kind a trained number is made of and the "
        f"answers the {MIN_CREDIT_AGREEMENT:.0%} instrument target is read on (docs/preregistration.md), each "
        f"graded once by the matcher frozen before it: {final_agreed}/{final_n} = {final_agreed / final_n:.1%}."
        if final_n
        else ""
    )
    out_of_sample = (
        "on fresh blind batches of trained answers, each graded once by it at its freeze, its credit "
        f"agreed: {measured}."
        if measured
        else "no fresh blind batch of trained answers has been graded by it yet: its agreement out of "
        "sample is unmeasured."
    )
    return (
        f" The matcher grading them ({MATCHER_VERSION}) was revised after the registered verdict, in rule "
        f"rounds written on other answers (docs/preregistration.md); {out_of_sample}{pooled}"
    )


def _disputed_conventions(trained: pd.DataFrame) -> str:
    """One warning per trained model whose count by the labels differs under a labeller's strict
    reading: its number rests on a labelling convention, whatever the matcher's agreement."""
    disputed = trained[trained["correct (strict labels)"] != trained["correct (labels where labelled)"]]
    return "".join(
        f" **{row['model']} rests on a disputed labelling convention:** "
        f"{row['correct (labels where labelled)']} correct by the labels, {row['correct (strict labels)']} "
        "under a labeller's strict reading (instrument table; labels README)."
        for _, row in disputed.iterrows()
    )


def primary_verdict(profile: Profile, table: pd.DataFrame) -> str:
    """The success rule applied to the primary arm's seeds judged so far."""
    registration = profile.require("preregistration")
    planned = sum(1 for arm, _ in registered_order(profile) if arm == registration.primary_arm)
    if "arm" not in table:
        return f"primary arm `{registration.primary_arm}`: 0 of {planned} seeds judged (controls only)"
    primary = table[table["arm"] == registration.primary_arm]
    wins = primary[
        (primary["vs format-controlled: p (exact McNemar)"] < 0.05)
        & (primary["vs format-controlled: diff"] > 0)
    ]
    return (
        f"primary arm `{registration.primary_arm}`: {len(primary)} of {planned} seeds judged; "
        f"{len(wins)} above the format-controlled base with p < 0.05 (success needs 2 of 3)"
    )


_SECTIONS = {
    "results": "Test set (primary and secondary comparisons)",
    "hard": "Hard set (transfer; Wilson intervals; the diff is paired by episode against the base; after the "
    "registered columns, the rows graded by their blind labels where labelled, batch RH)",
    "real_records": "Real LongMemEval records (sanity row: n is tiny and decides nothing)",
    "instrument": "Instrument: the matcher against blind human labels on the test set (sensitivity row)",
    "notes": "What the final notes held on the test set (exploratory: added after `format` s11 was read)",
    "trend": "Training trend (each step's episode one cluster: one-sided Kendall tau over the steps)",
}


def write_results(profile: Profile) -> Path:
    """`outputs/<profile>/preregistered/`: `results.md` and a CSV per table of what has run."""
    test = results_table(profile)
    tables = {"results": test, "hard": hard_table(profile), "real_records": real_records_table(profile)}
    tables["instrument"] = instrument_table(profile)
    tables["notes"] = notes_table(profile)
    tables["trend"] = trend_table(profile)
    folder = profiles.output_dir(profile, "preregistered")
    lines = [
        f"# {profile.name}: the registered analysis of what has run",
        "",
        "Greedy, bounded memory B=300 unless named; design: docs/preregistration.md.",
        "",
        primary_verdict(profile, test),
    ]
    status = reporting_status(profile, test, tables["instrument"])
    lines += ["", status] if status else []
    for name, table in tables.items():
        table.to_csv(folder / f"{name}.csv", index=False)
        body = markdown_table(printed_p_values(table)) if not table.empty else "(not run yet)"
        lines += ["", f"## {_SECTIONS[name]}", "", body]
    (folder / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "results.md"
