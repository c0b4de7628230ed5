"""Paired significance tests and intervals for per-question correctness.

Every condition in the paper runs on the same questions, so comparisons are paired: McNemar's test
on the discordant pairs (statsmodels), a paired bootstrap of the accuracy difference (scipy), Wilson
intervals for single accuracies (statsmodels) and Holm's adjustment across several tests. Inputs are
per-question booleans in the same question order for both conditions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class McNemarResult:
    """Discordant counts and both p values of McNemar's test.

    `b`: questions A got right and B got wrong; `c`: A wrong and B right; `n`: all paired questions.
    `p_exact`: two-sided exact binomial test on b of b + c (the conservative small-sample choice).
    `p_chi2_corrected`: chi-square with continuity correction, (|b - c| - 1)^2 / (b + c) on 1 degree of
    freedom; this is the p the paper reports (0.0035 for 19 vs 4, 0.0033 for 13 vs 1).
    `statistic`: that corrected chi-square statistic (0.0 when b = c = 0).
    """

    b: int
    c: int
    n: int
    p_exact: float
    p_chi2_corrected: float
    statistic: float


@dataclass(frozen=True)
class BootstrapResult:
    """Accuracy difference mean(A) - mean(B) and its percentile bootstrap interval."""

    diff: float
    low: float
    high: float


def _paired_arrays(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """Both inputs as boolean arrays; raises when they cannot be paired question by question."""
    arrays = []
    for name, values in (("correct_a", correct_a), ("correct_b", correct_b)):
        array = np.asarray(values)
        if array.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
        if array.dtype != bool:
            if array.size and not np.isin(array, (0, 1)).all():
                raise ValueError(
                    f"{name} must hold booleans (or 0/1), got values such as {array[:5].tolist()}"
                )
            array = array.astype(bool)
        arrays.append(array)
    if len(arrays[0]) != len(arrays[1]):
        raise ValueError(
            f"paired inputs differ in length: correct_a has {len(arrays[0])}, correct_b has {len(arrays[1])}"
        )
    return arrays[0], arrays[1]


def paired_mcnemar(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> McNemarResult:
    """McNemar's test of condition A against condition B on the same questions (see `McNemarResult`).

    With no discordant pair (b = c = 0) there is no evidence of a difference: both p values are 1.0.
    The continuity correction shrinks |b - c| by 1 but never below 0: statsmodels computes
    (|b - c| - 1)^2 / (b + c), which gives a tie (b = c) a positive statistic and p < 1; here a tie
    has statistic 0 and p = 1, as the exact test says.
    """
    from statsmodels.stats.contingency_tables import mcnemar

    a, b_array = _paired_arrays(correct_a, correct_b)
    b = int(np.sum(a & ~b_array))
    c = int(np.sum(~a & b_array))
    if b + c == 0:
        return McNemarResult(b=0, c=0, n=len(a), p_exact=1.0, p_chi2_corrected=1.0, statistic=0.0)
    table = [[int(np.sum(a & b_array)), b], [c, int(np.sum(~a & ~b_array))]]
    exact = mcnemar(table, exact=True)
    if b == c:
        p_corrected, statistic = 1.0, 0.0
    else:
        corrected = mcnemar(table, exact=False, correction=True)
        p_corrected, statistic = float(corrected.pvalue), float(corrected.statistic)
    return McNemarResult(
        b=b, c=c, n=len(a), p_exact=float(exact.pvalue), p_chi2_corrected=p_corrected, statistic=statistic
    )


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for `successes` out of `n`.

    `n == 0` returns (0.0, 1.0): with no observation every accuracy is possible, and tables with an
    empty group still render. Counts outside 0 <= successes <= n raise ValueError.
    """
    from statsmodels.stats.proportion import proportion_confint

    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n == 0:
        return 0.0, 1.0
    low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    return float(low), float(high)


def paired_bootstrap_diff(
    correct_a: Sequence[bool],
    correct_b: Sequence[bool],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Percentile bootstrap interval of mean(A) - mean(B), resampling questions (pairs stay together).

    Resampling the per-question differences a_i - b_i is resampling question indices for both
    conditions at once. Deterministic for a given `seed` (numpy Generator).
    """
    from scipy.stats import bootstrap

    a, b = _paired_arrays(correct_a, correct_b)
    if len(a) == 0:
        raise ValueError("paired_bootstrap_diff needs at least one question, got empty inputs")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    differences = a.astype(float) - b.astype(float)
    diff = float(differences.mean())
    result = bootstrap(
        (differences,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        batch=1_000,
        rng=np.random.default_rng(seed),
    )
    interval = result.confidence_interval
    return BootstrapResult(diff=diff, low=float(interval.low), high=float(interval.high))


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p values, in the order given.

    The arithmetic of statsmodels' `multipletests(method="holm")` (the tests check they agree),
    without the full `gc.collect()` that function runs on every call: ~0.7 s each in a process that
    holds a study's frames, paid once per model and condition by every table that adjusts.
    """
    p = np.asarray(p_values, dtype=float)
    if p.size == 0:
        return []
    order = np.argsort(p)
    adjusted_sorted = np.minimum(np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1)), 1.0)
    adjusted = np.empty_like(adjusted_sorted)
    adjusted[order] = adjusted_sorted
    return adjusted.tolist()


def accuracy_table(
    df: pd.DataFrame, group_cols: Sequence[str], correct_col: str, confidence: float = 0.95
) -> pd.DataFrame:
    """One row per group: n, correct, accuracy and the Wilson interval (ci_low, ci_high).

    `correct_col` must hold booleans (or 0/1) without missing values; the groups keep their order of
    appearance in `df`.
    """
    group_cols = [group_cols] if isinstance(group_cols, str) else list(group_cols)
    missing = [column for column in [*group_cols, correct_col] if column not in df.columns]
    if missing:
        raise KeyError(f"accuracy_table: columns {missing} not in the frame (has {list(df.columns)})")
    correct = df[correct_col]
    if correct.isna().any():
        rows = df.index[correct.isna()].tolist()[:5]
        raise ValueError(f"accuracy_table: column {correct_col!r} has missing values (rows {rows})")
    if not correct.isin([True, False]).all():
        raise ValueError(f"accuracy_table: column {correct_col!r} must hold booleans or 0/1")
    frame = df.assign(_correct=correct.astype(bool))
    grouped = frame.groupby(group_cols, sort=False, dropna=False)["_correct"].agg(n="size", correct="sum")
    table = grouped.reset_index()
    table["correct"] = table["correct"].astype(int)
    table["accuracy"] = table["correct"] / table["n"]
    intervals = [
        wilson_interval(int(k), int(n), confidence) for k, n in zip(table["correct"], table["n"], strict=True)
    ]
    table["ci_low"] = [low for low, _ in intervals]
    table["ci_high"] = [high for _, high in intervals]
    return table


@dataclass(frozen=True)
class TrendResult:
    """Successes in the first and the last quarter of a run's steps, and whether the last is higher.

    `p_one_sided`: Fisher's exact test that the last quarter's success rate exceeds the first's
    (rollouts pooled within each quarter; the rollouts of one step share an episode, so this counts
    them as if independent and is optimistic when groups are large).
    `p_steps_one_sided`: the conservative counterpart, a one-sided Mann-Whitney U test on the per-step
    success rates (each step one observation, so the shared episode is counted once).
    """

    first_successes: int
    first_n: int
    last_successes: int
    last_n: int
    p_one_sided: float
    p_steps_one_sided: float = float("nan")

    @property
    def first_rate(self) -> float:
        return self.first_successes / self.first_n if self.first_n else float("nan")

    @property
    def last_rate(self) -> float:
        return self.last_successes / self.last_n if self.last_n else float("nan")


def quarter_steps(steps: Sequence[int]) -> tuple[list[int], list[int]]:
    """The first and the last ceil(S / 4) of the S distinct steps (the quarters a trend compares)."""
    ordered = sorted(set(steps))
    quarter = max(1, -(-len(ordered) // 4))
    return ordered[:quarter], ordered[-quarter:]


def success_trend(steps: Sequence[int], successes: Sequence[bool]) -> TrendResult:
    """Did training succeed more often at the end? One row per rollout: its step and whether it succeeded.

    The quarters are the first and last ceil(S / 4) of the S distinct steps.
    """
    from scipy.stats import fisher_exact, mannwhitneyu

    frame = pd.DataFrame({"step": list(steps), "success": [bool(value) for value in successes]})
    if frame.empty:
        raise ValueError("success_trend needs at least one rollout")
    first_steps, last_steps = quarter_steps(frame["step"])
    first = frame[frame["step"].isin(first_steps)]["success"]
    last = frame[frame["step"].isin(last_steps)]["success"]
    table = [
        [int(last.sum()), int((~last).sum())],
        [int(first.sum()), int((~first).sum())],
    ]
    _, p_value = fisher_exact(table, alternative="greater")
    per_step = frame.groupby("step")["success"].mean()
    p_steps = (
        float(mannwhitneyu(per_step.loc[last_steps], per_step.loc[first_steps], alternative="greater").pvalue)
        if len(per_step) >= 2 * len(first_steps) and len(first_steps) > 1
        else float("nan")
    )
    return TrendResult(
        first_successes=int(first.sum()),
        first_n=len(first),
        last_successes=int(last.sum()),
        last_n=len(last),
        p_one_sided=float(p_value),
        p_steps_one_sided=p_steps,
    )


@dataclass(frozen=True)
class StepTrend:
    """Kendall's tau of per-step success rate on step, one-sided (a rising rate), over S steps."""

    steps: int
    tau: float
    p_one_sided: float


def step_success_trend(steps: Sequence[int], successes: Sequence[bool]) -> StepTrend:
    """Did the success rate rise over training, with each step's episode counted once?

    Each GRPO step samples one group on one episode, so its rollouts share that episode: the per-step
    success rate is one cluster, and the S rates (not the rollouts) are the observations. A constant
    rate (every step equal) has no trend: tau 0, p 1.
    """
    from scipy.stats import kendalltau

    frame = pd.DataFrame({"step": list(steps), "success": [bool(value) for value in successes]})
    if frame.empty:
        raise ValueError("step_success_trend needs at least one rollout")
    per_step = frame.groupby("step")["success"].mean()
    if per_step.nunique() < 2:
        return StepTrend(steps=len(per_step), tau=0.0, p_one_sided=1.0)
    result = kendalltau(per_step.index.to_numpy(), per_step.to_numpy(), alternative="greater")
    return StepTrend(steps=len(per_step), tau=float(result.statistic), p_one_sided=float(result.pvalue))
