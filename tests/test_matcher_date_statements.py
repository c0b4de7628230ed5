"""Matcher v7 (issue 26; docs/preregistration.md, "Matcher v7"): an answer that states the current date
before it answers ("The current date is 2023/05/26 (Fri) 17:20, and the running count is five.") offers
one value, not two. Under v6 the stamp's clause or numbers counted as a second candidate and such answers
were graded hedged: 11 of the 68 credit disagreements over the labelled set, nine of them one registered
adapter's test rows. The rule was written on those labelled answers and frozen before batch F4 existed.

The controls below hold what the rule must not open: a choice joined by "or", counts hidden among a
date's numbers, a date that is itself the asked value, and a stale value offered outside the statement.
"""

import pytest

from supersede_lib.eval.matcher import score_answer

GAME_DAY = "Which day of the week is my football game?"
RAMEN = "How many ramen shops have I tried so far?"
JOB = "What's my job title?"

CASES = [
    # (answer, gold, stale, question, verdict)
    (
        "The current date is 2023/05/26 (Fri) 17:20, and the running count is four.",
        "4",
        "3",
        RAMEN,
        "correct",
    ),
    (
        "The current date is 2023/05/26 (Fri) 17:20, and you have tried 4 ramen shops.",
        "4",
        "3",
        RAMEN,
        "correct",
    ),
    (
        "Today is Friday, 23 February 2023, 16:22, and your job title is data analyst.",
        "data analyst",
        "intern",
        JOB,
        "correct",
    ),
    (
        "Today's date is Monday, May 8, 2023 at 1:01 PM. Your job title is data analyst.",
        "data analyst",
        "intern",
        JOB,
        "correct",
    ),
    (
        "The current date is Tuesday, 2023/02/27 (Mon) 11:11, and the game is on Thursdays.",
        "Thursday",
        "Tuesday",
        GAME_DAY,
        "correct",
    ),
    (
        "The current date is Saturday, 2023/03/25 (Sat) 07:49, and the game is on Saturdays.",
        "Saturday",
        "Sunday",
        GAME_DAY,
        "correct",
    ),
    # controls: what v6 graded, v7 grades the same
    ("The current date is 2023/05/26 (Fri) 17:20, and the count is 4 or 5.", "4", "3", RAMEN, "wrong"),
    ("Today is Friday, 3, 4 and 5.", "4", "2", RAMEN, "wrong"),
    ("Today is Tuesday or Thursday.", "Thursday", "Tuesday", GAME_DAY, "ambiguous"),
    ("The current date is Tuesday, or Thursday.", "Thursday", "Tuesday", GAME_DAY, "ambiguous"),
    (
        "The current date is Tuesday, and the game is on Thursdays or Tuesdays.",
        "Thursday",
        "Tuesday",
        GAME_DAY,
        "ambiguous",
    ),
    ("Today is Thursday, and the game is on Tuesdays.", "Thursday", "Tuesday", GAME_DAY, "ambiguous"),
    (
        "Today is my day off, and the game is on Thursdays or Mondays.",
        "Thursday",
        "Tuesday",
        GAME_DAY,
        "wrong",
    ),
    ("The game date is Thursday.", "Thursday", "Tuesday", GAME_DAY, "correct"),
    ("The current date is Thursday.", "Thursday", "Tuesday", GAME_DAY, "correct"),
]


@pytest.mark.parametrize(("answer", "gold", "stale", "question", "verdict"), CASES)
def test_a_statement_of_the_current_date_is_no_second_candidate(
    answer, gold, stale, question, verdict
) -> None:
    assert score_answer(answer, [gold], [stale], question=question).verdict == verdict


@pytest.mark.parametrize(
    "stamp", ["2023/05/26 (Fri) 17:20", "Friday, 26 May 2023", "Friday, May 26, 2023 at 5:20 PM"]
)
def test_the_stamp_hides_no_stale_count_and_offers_none(stamp: str) -> None:
    """A stale count written after the statement is still asserted; the statement alone asserts nothing."""
    after = score_answer(f"The current date is {stamp}, and the count is 3.", ["4"], ["3"], question=RAMEN)
    alone = score_answer(f"The current date is {stamp}.", ["4"], ["3"], question=RAMEN)
    assert (after.verdict, alone.verdict) == ("stale", "wrong")
