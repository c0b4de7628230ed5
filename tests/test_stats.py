"""Paired statistics: the paper's McNemar p values, Wilson intervals, the paired bootstrap, tables."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom, chi2

from supersede_lib.eval.stats import (
    BootstrapResult,
    McNemarResult,
    accuracy_table,
    holm_adjusted,
    paired_bootstrap_diff,
    paired_mcnemar,
    success_trend,
    wilson_interval,
)


def _paired(b: int, c: int, both_right: int = 0, both_wrong: int = 0) -> tuple[list[bool], list[bool]]:
    """Per-question correctness with b A-only wins, c B-only wins, and the concordant rest."""
    a = [True] * b + [False] * c + [True] * both_right + [False] * both_wrong
    other = [False] * b + [True] * c + [True] * both_right + [False] * both_wrong
    return a, other


def _by_hand(b: int, c: int) -> tuple[float, float, float]:
    statistic = max(abs(b - c) - 1, 0) ** 2 / (b + c)  # the correction shrinks |b - c| toward 0, not past it
    exact = min(1.0, 2 * binom.cdf(min(b, c), b + c, 0.5))
    return statistic, float(chi2.sf(statistic, df=1)), float(exact)


@pytest.mark.parametrize(
    ("b", "c", "paper_p", "concordant"),
    [(19, 4, 0.0035, (45, 10)), (13, 1, 0.0033, (59, 5))],  # gpt-4.1-mini and gpt-5.4, 78 questions
)
def test_mcnemar_reproduces_the_papers_corrected_p(b, c, paper_p, concordant) -> None:
    a, other = _paired(b, c, *concordant)
    result = paired_mcnemar(a, other)
    statistic, p_chi2, p_exact = _by_hand(b, c)
    assert (result.b, result.c, result.n) == (b, c, 78)
    assert round(result.p_chi2_corrected, 4) == paper_p
    assert result.p_chi2_corrected == pytest.approx(p_chi2, rel=1e-9)
    assert result.statistic == pytest.approx(statistic, rel=1e-9)
    assert result.p_exact == pytest.approx(p_exact, rel=1e-9)
    assert result.p_exact < result.p_chi2_corrected


def test_mcnemar_counts_direction_and_ignores_concordant_pairs() -> None:
    a = [True, True, False, False, True]
    other = [False, True, True, False, True]
    result = paired_mcnemar(a, other)
    assert (result.b, result.c, result.n) == (1, 1, 5)
    swapped = paired_mcnemar(other, a)
    assert (swapped.b, swapped.c) == (1, 1)
    assert paired_mcnemar(*_paired(5, 2)).b == 5
    assert paired_mcnemar(*reversed(_paired(5, 2))).c == 5


def test_mcnemar_equal_discordance_is_not_significant() -> None:
    result = paired_mcnemar(*_paired(4, 4, 10, 7))  # the paper's b = c = 4 memory-scaling case
    assert result.p_exact == 1.0
    assert result.p_chi2_corrected == pytest.approx(_by_hand(4, 4)[1]) == 1.0
    assert result.statistic == 0.0
    one_each = paired_mcnemar(*_paired(1, 1, 5, 5))
    assert (one_each.p_exact, one_each.p_chi2_corrected) == (1.0, 1.0)
    assert paired_mcnemar(*_paired(2, 1)).statistic == 0.0  # |b - c| = 1: corrected to no difference


def test_mcnemar_without_discordant_pairs_gives_p_one() -> None:
    result = paired_mcnemar([True, False, True], [True, False, True])
    assert result == McNemarResult(b=0, c=0, n=3, p_exact=1.0, p_chi2_corrected=1.0, statistic=0.0)
    assert paired_mcnemar([], []).n == 0


def test_mcnemar_accepts_zero_one_integers_and_numpy() -> None:
    assert paired_mcnemar([1, 0, 1], np.array([0, 0, 1])).b == 1


def test_mcnemar_rejects_unequal_lengths_naming_both() -> None:
    with pytest.raises(ValueError, match=r"correct_a has 3.*correct_b has 2"):
        paired_mcnemar([True, False, True], [True, False])


def test_mcnemar_rejects_values_that_are_not_booleans() -> None:
    with pytest.raises(ValueError, match="correct_b"):
        paired_mcnemar([True, False], [0.5, 1])


def test_wilson_interval_matches_hand_computation() -> None:
    successes, n, z = 63, 78, 1.959963984540054
    p = successes / n
    center = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    low, high = wilson_interval(successes, n)
    assert low == pytest.approx(center - half, abs=1e-9)
    assert high == pytest.approx(center + half, abs=1e-9)
    assert (round(low, 4), round(high, 4)) == (0.7067, 0.8798)


def test_wilson_interval_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12) and 0 < high < 0.35
    low, high = wilson_interval(10, 10)
    assert 0.65 < low < 1 and high == pytest.approx(1.0)
    narrow, wide = wilson_interval(50, 100, 0.80), wilson_interval(50, 100, 0.99)
    assert wide[0] < narrow[0] < 0.5 < narrow[1] < wide[1]


@pytest.mark.parametrize(("successes", "n"), [(5, 4), (-1, 3), (0, -1)])
def test_wilson_interval_rejects_impossible_counts(successes, n) -> None:
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(successes, n)


def test_bootstrap_is_deterministic_by_seed() -> None:
    a, other = _paired(19, 4, 45, 10)
    first = paired_bootstrap_diff(a, other, n_resamples=2_000, seed=7)
    again = paired_bootstrap_diff(a, other, n_resamples=2_000, seed=7)
    different = paired_bootstrap_diff(a, other, n_resamples=2_000, seed=8)
    assert first == again
    assert (first.low, first.high) != (different.low, different.high)


def test_bootstrap_identical_inputs_give_zero_everywhere() -> None:
    same = [True, False, True, True, False]
    assert paired_bootstrap_diff(same, same, n_resamples=500) == BootstrapResult(0.0, 0.0, 0.0)


def test_bootstrap_interval_contains_estimate_and_excludes_zero_for_a_real_gap() -> None:
    a, other = _paired(19, 4, 45, 10)
    result = paired_bootstrap_diff(a, other, n_resamples=5_000, seed=0)
    assert result.diff == pytest.approx((19 - 4) / 78)
    assert result.low <= result.diff <= result.high
    assert result.low > 0


def test_bootstrap_interval_straddles_zero_without_a_gap() -> None:
    a, other = _paired(4, 4, 10, 7)
    result = paired_bootstrap_diff(a, other, n_resamples=2_000, seed=1)
    assert result.diff == 0.0
    assert result.low < 0 < result.high


def test_bootstrap_is_paired_not_independent() -> None:
    """Perfectly correlated conditions: pairing makes the interval collapse; independent resampling would not."""
    rng = np.random.default_rng(3)
    a = rng.random(200) < 0.6
    result = paired_bootstrap_diff(a, a.copy(), n_resamples=1_000)
    assert (result.low, result.high) == (0.0, 0.0)


def test_bootstrap_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="at least one"):
        paired_bootstrap_diff([], [])
    with pytest.raises(ValueError, match="correct_a has 2"):
        paired_bootstrap_diff([True, False], [True])
    with pytest.raises(ValueError, match="n_resamples"):
        paired_bootstrap_diff([True], [False], n_resamples=0)


def test_accuracy_table_groups_counts_and_intervals() -> None:
    frame = pd.DataFrame(
        {
            "model": ["m1"] * 4 + ["m2"] * 3,
            "condition": ["full", "full", "bounded", "bounded", "full", "full", "full"],
            "correct": [True, True, False, True, 1, 0, 1],
        }
    )
    table = accuracy_table(frame, ["model", "condition"], "correct")
    assert list(table.columns) == ["model", "condition", "n", "correct", "accuracy", "ci_low", "ci_high"]
    assert table[["model", "condition"]].values.tolist() == [
        ["m1", "full"],
        ["m1", "bounded"],
        ["m2", "full"],
    ]
    assert table["n"].tolist() == [2, 2, 3]
    assert table["correct"].tolist() == [2, 1, 2]
    assert table["accuracy"].tolist() == pytest.approx([1.0, 0.5, 2 / 3])
    assert (table["ci_low"].iloc[2], table["ci_high"].iloc[2]) == pytest.approx(wilson_interval(2, 3))


def test_accuracy_table_names_bad_columns() -> None:
    frame = pd.DataFrame({"model": ["m"], "correct": [None]})
    with pytest.raises(KeyError, match="condition"):
        accuracy_table(frame, ["condition"], "correct")
    with pytest.raises(ValueError, match="'correct' has missing values"):
        accuracy_table(frame, ["model"], "correct")
    with pytest.raises(ValueError, match="booleans"):
        accuracy_table(pd.DataFrame({"model": ["m"], "correct": ["yes"]}), ["model"], "correct")


def test_success_trend_compares_the_first_and_last_quarter_of_steps() -> None:
    steps = [step for step in range(1, 9) for _ in range(8)]  # 8 steps of 8 rollouts: quarters of 2 steps
    rising = [step >= 7 or (step <= 2 and rollout == 0) for step in range(1, 9) for rollout in range(8)]
    trend = success_trend(steps, rising)
    assert (trend.first_successes, trend.first_n, trend.last_successes, trend.last_n) == (2, 16, 16, 16)
    assert trend.last_rate == 1.0 and trend.first_rate == 0.125
    assert trend.p_one_sided < 1e-5
    falling = success_trend(steps, [not value for value in rising])
    assert falling.p_one_sided > 0.99  # one-sided: a fall is no evidence of a rise
    flat = success_trend([1, 1, 2, 2], [True, False, True, False])
    assert (flat.first_n, flat.last_n) == (2, 2) and flat.p_one_sided > 0.5
    with pytest.raises(ValueError, match="at least one rollout"):
        success_trend([], [])


def test_success_trend_also_tests_steps_as_units_which_is_more_conservative() -> None:
    # 20 steps of 8: the first 5 steps 1/8 each, the last 5 steps 4/8 each
    rates = [1] * 5 + [2] * 10 + [4] * 5
    steps = [step for step in range(1, 21) for _ in range(8)]
    successes = [rollout < rates[step - 1] for step in range(1, 21) for rollout in range(8)]
    trend = success_trend(steps, successes)
    assert (trend.first_successes, trend.last_successes) == (5, 20)
    assert trend.p_steps_one_sided < 0.05  # five of five last steps above all five first steps
    assert trend.p_one_sided < trend.p_steps_one_sided  # pooling rollouts claims more than the steps show
    # two good steps among the last five are no rise of the steps, though the rollouts pool to one
    lucky = [1] * 5 + [2] * 10 + [0, 0, 1, 8, 8]
    bumpy = success_trend(steps, [rollout < lucky[step - 1] for step in range(1, 21) for rollout in range(8)])
    assert bumpy.p_one_sided < 0.05 and bumpy.p_steps_one_sided > 0.3
    assert math.isnan(success_trend([1, 2, 3, 4], [True, False, True, False]).p_steps_one_sided)


def test_step_trend_counts_each_step_once() -> None:
    """Eight rollouts of one step share an episode: the per-step rate is the observation, so the
    same rates with more rollouts per step give the same test."""
    from supersede_lib.eval.stats import step_success_trend

    rates = [0, 0, 1, 0, 1, 1, 2, 1, 2, 3, 3, 2, 4, 3, 4, 5, 4, 6, 5, 6]  # successes out of 8, rising
    steps = [step for step, _ in enumerate(rates, 1) for _ in range(8)]
    successes = [slot < rate for rate in rates for slot in range(8)]
    trend = step_success_trend(steps, successes)
    doubled = step_success_trend(steps * 2, successes * 2)
    assert trend.steps == 20 and trend.tau > 0.7 and trend.p_one_sided < 0.001
    assert (doubled.tau, doubled.p_one_sided) == (trend.tau, trend.p_one_sided)
    falling = step_success_trend(steps, [slot < 8 - rate for rate in rates for slot in range(8)])
    assert falling.p_one_sided > 0.99
    flat = step_success_trend(steps, [True] * len(steps))
    assert (flat.tau, flat.p_one_sided) == (0.0, 1.0)


def test_holm_adjusted_is_statsmodels_holm_to_the_bit() -> None:
    from statsmodels.stats.multitest import multipletests

    generator = np.random.default_rng(3)
    cases = [generator.uniform(0, 1, size) for size in (1, 2, 7, 30)]
    cases += [np.array([0.01, 0.04, 0.04, 0.3, 0.01]), np.array([1e-12, 0.5, 0.5, 1.0]), np.array([0.3, 0.4])]
    for p_values in cases:
        assert holm_adjusted(p_values) == multipletests(p_values, method="holm")[1].tolist()
    assert holm_adjusted([]) == []
    assert holm_adjusted([0.04, 0.01]) == [0.04, 0.02]  # 0.01 x 2 first, then max(0.02, 0.04 x 1)
