"""The predictions P1-P7 of docs/robustness-log.md, judged mechanically from 09's drops table.

The predictions were committed before any trained twin met a perturbed episode; this module applies
their rules as written, so no reading of the results can bend them. Each prediction is a conjunction
of clauses, one per (model, perturbation, rule); a clause reads the drops rows (bounded memory) of its
twin and of the format-controlled base:

- a twin's *gain* on a set is its accuracy minus the format-controlled base's on the same set; on a
  perturbation, the unperturbed gain is read on the unperturbed twins of its pairs and the perturbed
  gain on the perturbed episodes;
- "keeps less than half its unperturbed gain": perturbed gain < unperturbed gain / 2 ("at least
  half": >=), as written, whatever the sign of the unperturbed gain (the numbers are shown beside);
- "the drop is significant": Holm-adjusted p < 0.05 *and* a positive drop (a significant rise is no
  drop); "no significant drop" is its negation;
- "drops more (paired) than the format-controlled base": the twin's drop > the base's drop.

A clause whose model is absent is "not evaluable (model missing)"; a prediction is broken when any
clause is broken, kept when every clause is kept, and otherwise not evaluable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

REFERENCE = "format-controlled base"  # the labels of 09's trained block that the log's models carry
TWINS = {"s11": "verdict s11 twin", "s12": "verdict s12 twin"}
CONDITION = "bounded_memory"
ALPHA = 0.05
HALF = 0.5
MARGIN = 0.05  # P1: "at or below the format-controlled base's + 5 points"
TOLERANCE = 1e-9  # accuracies are fractions of n: equal shares must compare equal

KEPT, BROKEN = "kept", "broken"
MISSING = "not evaluable (model missing)"
NO_PAIRS = "not evaluable (no pairs compared)"


@dataclass(frozen=True)
class Numbers:
    """What a clause reads for one twin on one perturbation, the format-controlled base beside it."""

    accuracy_unperturbed: float
    accuracy_perturbed: float
    drop: float
    p_holm: float
    reference_unperturbed: float
    reference_perturbed: float
    reference_drop: float

    @property
    def gain_unperturbed(self) -> float:
        return self.accuracy_unperturbed - self.reference_unperturbed

    @property
    def gain_perturbed(self) -> float:
        return self.accuracy_perturbed - self.reference_perturbed

    def shown(self) -> str:
        """The numbers a reader checks the clause on, in points."""
        return (
            f"twin {_points(self.accuracy_unperturbed)} -> {_points(self.accuracy_perturbed)}, "
            f"base {_points(self.reference_unperturbed)} -> {_points(self.reference_perturbed)}; "
            f"gain {_points(self.gain_unperturbed, sign=True)} -> {_points(self.gain_perturbed, sign=True)}; "
            f"drop {_points(self.drop, sign=True)} (base {_points(self.reference_drop, sign=True)}), "
            f"p Holm {self.p_holm:.3g}"
        )


def _points(value: float, *, sign: bool = False) -> str:
    return f"{100 * value:+.1f}" if sign else f"{100 * value:.1f}"


def at_or_below_base_plus_5(numbers: Numbers) -> bool:
    return numbers.accuracy_perturbed <= numbers.reference_perturbed + MARGIN + TOLERANCE


def less_than_half_gain(numbers: Numbers) -> bool:
    return numbers.gain_perturbed < HALF * numbers.gain_unperturbed - TOLERANCE


def at_least_half_gain(numbers: Numbers) -> bool:
    return not less_than_half_gain(numbers)


def drops_more_than_base(numbers: Numbers) -> bool:
    return numbers.drop > numbers.reference_drop + TOLERANCE


def significant_drop(numbers: Numbers) -> bool:
    return numbers.drop > 0 and numbers.p_holm < ALPHA


def no_significant_drop(numbers: Numbers) -> bool:
    return not significant_drop(numbers)


@dataclass(frozen=True)
class Clause:
    """One rule of a prediction, for one twin (`s11`, `s12`) on one perturbation label."""

    prediction: str
    twin: str
    perturbation: str
    rule: str
    holds: Callable[[Numbers], bool]


def _clauses() -> list[Clause]:
    """The log's P1-P7, clause by clause (docs/robustness-log.md, 2026-12-02, predictions)."""
    below = ("accuracy <= format-controlled base + 5 points", at_or_below_base_plus_5)
    less = ("keeps less than half its unperturbed gain", less_than_half_gain)
    half = ("keeps at least half its unperturbed gain", at_least_half_gain)
    more = ("drops more (paired) than the format-controlled base", drops_more_than_base)
    calm = ("no significant drop (Holm p >= 0.05 or no drop)", no_significant_drop)
    significant = ("significant drop (Holm p < 0.05, drop > 0)", significant_drop)
    table = [
        ("P1", "s11", "k_facts-4", below),
        ("P1", "s11", "k_facts-2", less),
        ("P1", "s12", "k_facts-4", less),
        *[("P2", twin, "someone_else", rule) for twin in TWINS for rule in (less, more)],
        *[("P3", twin, "considered_not_made", less) for twin in TWINS],
        *[("P4", twin, "reverted", rule) for twin in TWINS for rule in (calm, half)],
        *[("P5", twin, "past_tense_later", rule) for twin in TWINS for rule in (calm, half)],
        ("P6", "s11", "held_out_vocab", half),
        ("P7", "s11", "distractor_density-8", significant),
        ("P7", "s11", "last_update_position-early", significant),
    ]
    return [Clause(name, twin, label, rule, holds) for name, twin, label, (rule, holds) in table]


CLAUSES = _clauses()


def _row(drops: pd.DataFrame, model: str, perturbation: str) -> dict | None:
    chosen = drops[
        (drops["model"] == model)
        & (drops["condition"] == CONDITION)
        & (drops["perturbation"] == perturbation)
    ]
    return chosen.iloc[0].to_dict() if len(chosen) else None


def clause_numbers(drops: pd.DataFrame, clause: Clause) -> Numbers | str:
    """The clause's numbers, or why it cannot be judged (a model missing, no pair compared)."""
    twin, reference = (_row(drops, model, clause.perturbation) for model in (TWINS[clause.twin], REFERENCE))
    if twin is None or reference is None:
        return MISSING
    numbers = Numbers(
        twin["accuracy_unperturbed"],
        twin["accuracy_perturbed"],
        twin["drop"],
        twin["p_holm"],
        reference["accuracy_unperturbed"],
        reference["accuracy_perturbed"],
        reference["drop"],
    )
    reads_p = clause.holds in (significant_drop, no_significant_drop)
    needed = [value for name, value in vars(numbers).items() if name != "p_holm" or reads_p]
    if any(pd.isna(value) for value in needed):
        return NO_PAIRS
    return numbers


def judge_clauses(drops: pd.DataFrame) -> pd.DataFrame:
    """One row per clause of P1-P7: the model, perturbation, rule, the numbers read and the result."""
    rows = []
    for clause in CLAUSES:
        numbers = clause_numbers(drops, clause)
        judged = isinstance(numbers, Numbers)
        rows.append(
            {
                "prediction": clause.prediction,
                "model": TWINS[clause.twin],
                "perturbation": clause.perturbation,
                "rule": clause.rule,
                "numbers": numbers.shown() if judged else "",
                "result": (KEPT if clause.holds(numbers) else BROKEN) if judged else numbers,
            }
        )
    return pd.DataFrame(rows)


def prediction_result(results: list[str]) -> str:
    """A conjunction: broken if any clause is, kept if every clause is, else not evaluable."""
    if BROKEN in results:
        return BROKEN
    if all(result == KEPT for result in results):
        return KEPT
    return MISSING if MISSING in results else NO_PAIRS


def per_prediction(
    clauses: pd.DataFrame,
    describe: Callable[[dict], str],
    conclude: Callable[[list[str]], str],
    verdict_column: str = "result",
) -> pd.DataFrame:
    """One row per prediction of a clause table (columns `prediction`, `result`): its verdict
    (`conclude` on its clauses' results) and its clauses, each written by `describe`, in one cell."""
    rows = []
    for name, group in clauses.groupby("prediction", sort=False):
        records = group.to_dict("records")
        rows.append(
            {
                "prediction": name,
                verdict_column: conclude([row["result"] for row in records]),
                "clauses": "; ".join(describe(row) for row in records),
            }
        )
    return pd.DataFrame(rows)


def judge_predictions(drops: pd.DataFrame) -> pd.DataFrame:
    """P1-P7 each kept, broken or not evaluable, with its clauses' results (`judge_clauses`) beside."""
    return per_prediction(
        judge_clauses(drops),
        lambda row: f"{row['model']}, {row['perturbation']}: {row['rule']}: {row['result']}",
        prediction_result,
    )
