"""No credit for a guess (issue 24, item 6): general rules, not the issue's cases alone.

Four kinds of answer hold the gold's words and still commit to nothing, even when the episode knows
no superseded value (as LongMemEval episodes do): two or more candidates for the asked slot, a denied
gold, the gold put in the past, and a range in place of a number. Each rule has hand-written cases,
controls that must keep their credit, and a hypothesis property over many values and templates.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supersede_lib.eval.matcher import score_answer

CITIES = ["Denver", "Chicago", "Baltimore", "Columbus", "Seattle", "Portland", "Austin", "Kyoto"]
NAMES = ["Nadia", "Sarah", "Tom", "Priya", "Elena"]
HOBBIES = ["salsa dancing", "pottery", "rock climbing", "chess"]

# (answer, gold, verdict): no superseded value known in any of them
CASES = [
    # two candidates for the slot
    ("Denver, Chicago", "Chicago", "wrong"),
    ("Chicago, Denver", "Chicago", "wrong"),
    ("Probably Denver, but it could be Chicago.", "Chicago", "wrong"),
    ("Probably Chicago, but it could be Denver.", "Chicago", "wrong"),
    ("Denver. Chicago is also possible.", "Chicago", "wrong"),
    ("Chicago. Denver is also possible.", "Chicago", "wrong"),
    ("3, 4", "3", "wrong"),
    ("Nadia, Sarah", "Nadia", "wrong"),
    # denied gold
    ("It is not the case that you live in Denver.", "Denver", "wrong"),
    ("It's not true that you live in Denver.", "Denver", "wrong"),
    ("I don't think you live in Denver.", "Denver", "wrong"),
    # the gold put in the past
    ("You once lived in Denver.", "Denver", "wrong"),
    ("Back then you lived in Denver.", "Denver", "wrong"),
    ("You lived in Denver in the past.", "Denver", "wrong"),
    # a range is not a number
    ("3-4", "3", "wrong"),
    ("3 to 4", "3", "wrong"),
    ("About 3 to 4 times a week.", "4", "wrong"),
    # controls: one committed answer keeps its credit
    ("Denver, Colorado", "Denver", "correct"),
    ("Your partner is Nadia, who you met at work.", "Nadia", "correct"),
    ("Acme, Inc.", "Acme", "correct"),
    ("$675, per month", "$675", "correct"),
    ("I think you live in Denver.", "Denver", "correct"),
    ("You go to the gym once a week, at CorePower.", "CorePower", "correct"),
    ("It went up from 3 to 4.", "4", "correct"),
    ("Your 10K best is 52:15.", "52:15", "correct"),
    ("You live in Denver now.", "Denver", "correct"),
]


@pytest.mark.parametrize(("answer", "gold", "verdict"), CASES)
def test_guesses_earn_nothing_and_committed_answers_keep_credit(answer: str, gold: str, verdict: str) -> None:
    assert score_answer(answer, [gold], []).verdict == verdict


@pytest.mark.parametrize(("answer", "gold", "verdict"), CASES)
def test_reward_never_pays_a_guess_at_any_stale_weight(answer: str, gold: str, verdict: str) -> None:
    """The GRPO reward reads the same verdict: with no stale value known, a guess earns 0 at any λ."""
    for weight in (0.0, 1.0):
        assert score_answer(answer, [gold], [], stale_penalty_weight=weight).reward == float(
            verdict == "correct"
        )


TWO_CANDIDATE_TEMPLATES = [
    "{a}, {b}",
    "{a} or {b}",
    "Probably {a}, but it could be {b}.",
    "{a}. {b} is also possible.",
    "It's either {a} or {b}.",
    "Maybe {a}, maybe {b}.",
]


@given(
    st.sampled_from(TWO_CANDIDATE_TEMPLATES),
    st.sampled_from([CITIES, NAMES, HOBBIES]),
    st.data(),
    st.booleans(),
)
def test_two_candidates_are_a_hedge_without_known_stale_values(template, pool, data, gold_first) -> None:
    first, second = data.draw(st.lists(st.sampled_from(pool), min_size=2, max_size=2, unique=True))
    gold = first if gold_first else second
    assert not score_answer(template.format(a=first, b=second), [gold], []).answered_current


DENIAL_TEMPLATES = [
    "It is not the case that you live in {v}.",
    "It's not true that your answer is {v}.",
    "I don't think it is {v}.",
    "You once lived in {v}.",
    "Back then it was {v}.",
]


@given(st.sampled_from(DENIAL_TEMPLATES), st.sampled_from(CITIES + NAMES + HOBBIES))
def test_a_denied_or_past_gold_is_not_credit(template, value) -> None:
    assert not score_answer(template.format(v=value), [value], []).answered_current


@given(
    st.integers(min_value=0, max_value=500),
    st.integers(min_value=1, max_value=50),
    st.sampled_from(["{a}-{b}", "{a} to {b}", "{a} through {b}", "between {a} and {b}", "{a}–{b} times"]),
    st.booleans(),
)
def test_a_range_is_not_a_number(low, width, template, gold_is_low) -> None:
    high = low + width
    gold = str(low if gold_is_low else high)
    assert not score_answer(template.format(a=low, b=high), [gold], []).answered_current


@given(st.sampled_from(CITIES + NAMES), st.sampled_from(["Colorado", "Illinois", "USA", "Canada", "Inc."]))
def test_a_refinement_after_a_comma_is_not_a_rival(value, refinement) -> None:
    assert score_answer(f"{value}, {refinement}", [value], []).verdict == "correct"


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("volunteer shift: Friday", "Friday"),
        ("pottery class: Mondays", "Monday"),
        ("Puppy: Olive", "Olive"),
        ("gym: Anytime Fitness", "Anytime Fitness"),
    ],
)
def test_a_label_before_a_colon_is_not_a_rival_value(answer: str, gold: str) -> None:
    """A notes line answers with its value; its label ("gym") is no second candidate."""
    assert score_answer(answer, [gold], []).verdict == "correct"


def test_a_stale_value_on_another_notes_line_still_withholds_credit() -> None:
    """A dump of notes lines that holds the old value under another label is no committed answer: a
    rule reading labels ("Emergency fund: $725" is another thing's) was tried and dropped, because
    labels name things in their own words ("carrier: US Mobile" beside "phone plan: Xfinity Mobile"
    for "who is my cell phone provider?") and a policy could learn to dump both values under two."""
    question = "Who is my cell phone provider?"
    dump = "phone plan: Xfinity Mobile\ncarrier: US Mobile"
    assert score_answer(dump, ["Xfinity Mobile"], ["US Mobile"], question=question).verdict == "ambiguous"


# Rules found on the trained adapters' answers (labels ans-511..750; issue 26, item 5), each general:
TRAINED_ANSWER_CASES = [
    # a time stamp's weekday is no rival day
    ("The current date is 2023/03/04 (Sat), and the pottery class is Monday.", ["Monday"], [], "correct"),
    # a list that belongs to another label is no list of candidates
    (
        'The line "eat: fruits, vegetables, and nuts" is about it, so "gym: Blink Fitness" is current.',
        ["Blink Fitness"],
        ["YMCA"],
        "correct",
    ),
    ("Gym: Blink Fitness\nRest days: 18:48\nWeek: 1", ["Blink Fitness"], ["YMCA"], "correct"),
    # what follows the gold's own colon is about the gold
    ("staff engineer: promoted", ["staff engineer"], ["content strategist"], "correct"),
    # "X and Y are ...": Y is a second candidate
    ("Salsa dancing and cycling are the hobbies I have lately.", ["salsa dancing"], [], "wrong"),
    ("Denver and Boston are both possible.", ["Denver"], [], "wrong"),
    ("The employer is Spotify, and the raise is small.", ["Spotify"], [], "correct"),
    # every number of a value is needed: "48 minutes" is not "31 minutes 48 seconds"
    ("48 minutes", ["31:09", "31 minutes 9 seconds"], ["31:48", "31 minutes 48 seconds"], "wrong"),
    ("31 minutes and 9 seconds", ["31:09", "31 minutes 9 seconds"], ["31:48"], "correct"),
]


@pytest.mark.parametrize(("answer", "gold", "stale", "verdict"), TRAINED_ANSWER_CASES)
def test_rules_found_on_trained_answers(answer: str, gold: list[str], stale: list[str], verdict: str) -> None:
    assert score_answer(answer, gold, stale).verdict == verdict


POSSESSIVE_CASES = [
    # someone else's value answers nothing about the user
    ("Sara's kitchen renovation budget is $41,000.", ["$41,000"], [], "", "wrong"),
    ("It matches the HR's statement about research scientist.", ["research scientist"], [], "", "wrong"),
    ("Genentech's office is where you work.", ["Genentech"], [], "", "correct"),
    # a contraction or the question's own thing is no other owner
    ("It's Denver, not Austin.", ["Denver"], ["Austin"], "", "correct"),
    ("Nadia's your partner.", ["Nadia"], [], "", "correct"),
    ("Kitten's name is Ziggy.", ["Ziggy"], [], "What's my kitten's name?", "correct"),
    ("Your partner's name is Nadia.", ["Nadia"], [], "", "correct"),
]


@pytest.mark.parametrize(("answer", "gold", "stale", "question", "verdict"), POSSESSIVE_CASES)
def test_a_value_said_of_someone_else_is_not_the_users(answer, gold, stale, question, verdict) -> None:
    assert score_answer(answer, gold, stale, question=question).verdict == verdict
