"""The matcher and reward: hand-written cases (paper examples first), then properties with hypothesis."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from supersede_lib.eval.matcher import (
    MAX_ANSWER_CHARS,
    Score,
    conveys_value,
    normalize,
    says_unknown,
    score_answer,
)

ABSTENTION_GOLD = ("The information provided is not enough. You mentioned Korean food but not restaurants.",)

# (answer, gold_answers, superseded_values, expected verdict)
CASES = [
    # paper examples and number spellings
    ("four", ("4",), (), "correct"),
    ("4", ("four",), (), "correct"),
    ("You have tried four Korean restaurants.", ("4",), ("3",), "correct"),
    ("You haven't mentioned any.", ("four",), (), "wrong"),
    ("No information about Rachel.", ("the suburbs",), ("Detroit",), "wrong"),
    ("the suburbs", ("The suburbs",), (), "correct"),
    ("Rachel moved to the suburbs.", ("The suburbs",), ("Detroit",), "correct"),
    ("14", ("4",), (), "wrong"),
    ("400", ("4",), (), "wrong"),
    ("twenty-five", ("25",), (), "correct"),
    # money: symbols, separators, words and k all name one amount
    ("$350,000", ("350000",), (), "correct"),
    ("350000", ("$350,000",), (), "correct"),
    ("You were pre-approved for $350,000.", ("$350,000",), ("$400,000",), "correct"),
    ("350K", ("$350,000",), (), "correct"),
    ("350 thousand dollars", ("$350,000",), (), "correct"),
    ("three hundred fifty thousand dollars", ("$350,000",), (), "correct"),
    ("$350,000.00", ("$350,000",), (), "correct"),
    ("$400,000", ("$350,000",), ("$400,000",), "stale"),
    ("$4,000", ("$400,000",), (), "wrong"),
    ("$400,000", ("$4,000",), (), "wrong"),
    ("50%", ("50 percent",), (), "correct"),
    # qualified and negated numbers: "over 25" does not convey 25, "about 25" does
    ("over 25", ("25",), (), "wrong"),
    ("More than 25.", ("25",), (), "wrong"),
    ("at least 25", ("25",), (), "wrong"),
    ("about 25", ("25",), (), "correct"),
    ("It's not 25.", ("25",), (), "wrong"),
    ("I'm not sure, but I think it's 25.", ("25",), (), "correct"),
    # sentence-long golds: token-overlap fallback, numbers mandatory
    ("You've tried 4 Korean restaurants.", ("You have tried four Korean restaurants",), (), "correct"),
    ("You have been to four Korean restaurants.", ("You have tried four Korean restaurants",), (), "correct"),
    ("You have tried five Korean restaurants.", ("You have tried four Korean restaurants",), (), "wrong"),
    ("Korean restaurants", ("You have tried four Korean restaurants",), (), "wrong"),
    # stale values inside gold spans, and gold inside stale spans
    ("Rachel moved to the suburbs of Detroit.", ("The suburbs of Detroit",), ("Detroit",), "correct"),
    ("She lives in the Detroit suburbs.", ("The suburbs of Detroit",), ("Detroit",), "correct"),
    # another spelling of a stale value framed as history is the same mention, not a new one
    (
        "Your best 10K is 49:53 now, down from 51:26.",
        ("49:53", "49 minutes 53 seconds"),
        ("51:26", "51 minutes 26 seconds"),
        "correct",
    ),
    (
        "I used to live in Salt Lake City; now I live in Denver.",
        ("Denver",),
        ("Salt Lake City", "the Salt Lake City area"),
        "correct",
    ),
    # a chat transcript's speaker labels are no rival answers; advice is no second answer
    ("I live in Denver.\nassistant: Great city.", ("Denver",), ("Austin",), "correct"),
    ("User: I moved to Denver.\nAssistant: Nice, enjoy it.", ("Denver",), ("Austin",), "correct"),
    ("assistant: Denver or Boston.", ("Denver",), ("Austin",), "wrong"),
    (
        "You drive a Honda Civic, but you might want to consider a hybrid or an electric car.",
        ("Honda Civic",),
        ("Nissan Leaf",),
        "correct",
    ),
    ("Denver, or consider Boston.", ("Denver",), ("Austin",), "wrong"),
    ("Detroit", ("The suburbs of Detroit",), ("Detroit",), "stale"),
    ("Detroit, or maybe the suburbs.", ("The suburbs of Detroit",), ("Detroit",), "ambiguous"),
    ("She lives in Detroit, not the suburbs.", ("The suburbs of Detroit",), ("Detroit",), "stale"),
    ("downtown Detroit", ("Detroit",), ("downtown Detroit",), "stale"),
    ("Detroit", ("Detroit",), ("detroit!",), "correct"),  # a stale value equal to the gold is ignored
    # stale mentioned as the past is not asserted; offered as an alternative it is
    (
        "You used to live in Detroit but now you live in the suburbs.",
        ("the suburbs",),
        ("Detroit",),
        "correct",
    ),
    ("The suburbs (you moved from Detroit).", ("the suburbs",), ("Detroit",), "correct"),
    ("Not Detroit, the suburbs.", ("the suburbs",), ("Detroit",), "correct"),
    ("It went up from $350,000 to $400,000.", ("$400,000",), ("$350,000",), "correct"),
    ("$400,000; it was $350,000 before.", ("$400,000",), ("$350,000",), "correct"),
    ("Either $350,000 or $400,000.", ("$400,000",), ("$350,000",), "ambiguous"),
    ("You live in Detroit and the suburbs.", ("the suburbs",), ("Detroit",), "ambiguous"),
    ("You no longer live in the suburbs.", ("the suburbs",), (), "wrong"),
    ("Your pre-approval was $350,000 and later rose to $400,000.", ("$400,000",), ("$350,000",), "correct"),
    ("Tom, then Sarah.", ("Sarah",), ("Tom",), "correct"),
    # naming the gold as the past value while asserting the stale one is not answering with the gold
    ("Previously $350,000, now $400,000.", ("$350,000",), ("$400,000",), "stale"),
    ("It was originally $350,000.", ("$350,000",), ("$400,000",), "wrong"),  # past framing: not current
    # plurals aside, whole tokens
    ("Wednesday", ("Wednesdays",), (), "correct"),
    ("You own 3 cats.", ("3 cats",), ("2 cats",), "correct"),
    ("Tuesday", ("Tuesdays and Thursdays",), (), "wrong"),
    # hedged enumerations earn nothing
    ("It could be Paris, London, Berlin, Rome or Madrid.", ("Paris",), (), "wrong"),
    ("Paris or London", ("Paris",), (), "wrong"),
    ("- Paris\n- London\n- Berlin", ("Paris",), (), "wrong"),
    ("Paris. London. Berlin.", ("Paris",), (), "wrong"),
    ("4, 5 or 6", ("4",), (), "wrong"),
    ("4 or 5", ("four",), (), "wrong"),
    ("Maybe 3, 4, 7 or 12 restaurants.", ("4",), (), "wrong"),
    ("Madrid, not Paris, not London.", ("Madrid",), ("Paris",), "correct"),
    # ...but ordinary detail does not look like a hedge
    ("On May 5, 2023 you were pre-approved for $350,000.", ("$350,000",), (), "correct"),
    ("The suburbs. She moved there in May and loves it.", ("the suburbs",), (), "correct"),
    ("You moved to the suburbs and adopted a dog.", ("the suburbs",), (), "correct"),
    ("Four: Kimchi House, Seoul Garden and Gangnam Grill.", ("4",), (), "correct"),
    (
        "Your best time is 25 minutes and 50 seconds (25:50).",
        ("25 minutes and 50 seconds", "25:50"),
        (),
        "correct",
    ),
    # empty answers
    ("", ("4",), (), "wrong"),
    ("   \n\t", ("4",), (), "wrong"),
]


@pytest.mark.parametrize(("answer", "gold", "stale", "verdict"), CASES)
def test_hand_written_cases(answer, gold, stale, verdict) -> None:
    assert score_answer(answer, gold, stale).verdict == verdict


@pytest.mark.parametrize(
    ("answer", "verdict", "reason"),
    [
        ("You haven't mentioned any Korean restaurants.", "correct", ""),
        ("I don't know.", "correct", ""),
        ("Sorry! I don't have that information.", "correct", ""),
        ("You mentioned Korean food, but not how many restaurants you tried.", "correct", ""),
        ("I'm not sure. If you tell me, I'll remember it.", "correct", ""),
        ("That's not in my notes.", "correct", ""),
        ("I can't tell from my notes.", "correct", ""),
        ("You have tried four Korean restaurants.", "wrong", ""),
        ("I don't know, maybe four.", "wrong", "asserts_value"),
        ("You tried four. I don't know more than that.", "wrong", "asserts_value"),
        ("I don't know; you might have tried three.", "stale", "asserts_value"),
        # a claim beside the "not sure" in the same sentence is no abstention (SmolLM2 answers)
        ("Elena's going to eat buttermilk, but I'm not sure what to recommend.", "wrong", "asserts_value"),
        ("The user's message is: \"I'm not sure if I have enough chickens.\"", "wrong", "asserts_value"),
        ("Answer: I don't know.", "correct", ""),
        ("I don't know where you ate, but I can note it if you tell me.", "correct", ""),
        ("", "wrong", "empty"),
    ],
)
def test_abstention_items_credit_saying_unknown_and_nothing_else(answer, verdict, reason) -> None:
    score = score_answer(answer, ABSTENTION_GOLD, ("three",), is_abstention=True)
    assert (score.verdict, score.reason) == (verdict, reason)


def test_reason_names_the_rule_that_withheld_credit() -> None:
    assert score_answer("Paris, London or Berlin", ["Paris"]).reason == "hedged"
    assert score_answer("Paris. " + "x" * MAX_ANSWER_CHARS, ["Paris"]).reason == "too_long"
    assert score_answer(None, ["Paris"]).reason == "empty"
    assert score_answer("Paris", ["Paris"]) == Score("correct", True, False, 1.0, "")


def test_length_cap_is_a_parameter() -> None:
    answer = "It is Paris, " + "and that is final. " * 10
    assert score_answer(answer, ["Paris"]).answered_current
    assert not score_answer(answer, ["Paris"], max_answer_chars=50).answered_current


def test_reward_combines_current_and_weighted_stale_penalty() -> None:
    both = "Either $350,000 or $400,000."
    # ambiguous (both values) never earns more than 0, at any λ: the reward is the evaluation's verdict
    for weight in (0.0, 0.5, 1.0):
        assert score_answer(both, ["$400,000"], ["$350,000"], stale_penalty_weight=weight).reward == 0.0
    assert score_answer(both, ["$400,000"], ["$350,000"], stale_penalty_weight=2.0).reward == -1.0
    assert score_answer("$350,000", ["$400,000"], ["$350,000"], stale_penalty_weight=2.0).reward == -2.0
    assert score_answer("$350,000", ["$400,000"], ["$350,000"], stale_penalty_weight=0.0).reward == 0.0
    assert score_answer("$350,000", ["$400,000"]).reward == 0.0  # gold-only data: the penalty is inert


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: score_answer("4", "4"), TypeError, "gold_answers must be a sequence"),
        (lambda: score_answer("4", [4]), TypeError, r"gold_answers\[0\]"),
        (lambda: score_answer("4", ["4"], [3]), TypeError, r"superseded_values\[0\]"),
        (lambda: score_answer("4", []), ValueError, "gold_answers is empty"),
        (lambda: score_answer("4", ["4"], stale_penalty_weight=-1), ValueError, "stale_penalty_weight"),
        (lambda: score_answer(4, ["4"]), TypeError, "answer must be a string"),
        (lambda: normalize(None), TypeError, "expected a string"),
    ],
)
def test_bad_input_raises_naming_the_field(call, error, message) -> None:
    with pytest.raises(error, match=message):
        call()


def test_previous_value_questions_accept_the_past_framing() -> None:
    answer = "Previously $350,000, now $400,000."
    # the later value framed as "now" is context for a previous-value question (human label ans-054)
    assert score_answer(answer, ["$350,000"], ["$400,000"], asks_previous_value=True).verdict == "correct"
    assert score_answer(answer, ["$350,000"], ["$400,000"]).verdict == "stale"


def test_abstention_items_need_no_gold() -> None:
    assert score_answer("I don't know.", [], is_abstention=True).verdict == "correct"


@pytest.mark.parametrize(
    ("variant", "canonical"),
    [
        ("$350,000", "350000"),
        ("350000 dollars", "350000"),
        ("350K", "350000"),
        ("350 thousand", "350000"),
        ("three hundred and fifty thousand", "350000"),
        ("1.5 million", "1500000"),
        ("Twenty-Five", "25"),
        ("one hundred and five", "105"),
        ("two and three", "2 and 3"),
        ("ninety-nine", "99"),
        ("the twenty-first", "21st"),
        ("Third", "3rd"),
        ("12.50", "12.5"),
        ("50%", "50 percent"),
        ("The Suburbs!", "suburbs"),
        ("Rachel's Café", "rachel cafe"),
        ("  An   apple\t a day ", "apple day"),
        ("Crème Brûlée", "creme brulee"),
        ("“Don’t” — ok", "dont ok"),
        ("Straße", "strasse"),
    ],
)
def test_normalize_variants(variant, canonical) -> None:
    assert normalize(variant) == canonical


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("You tried 14 restaurants", "4", False),
        ("You tried 4 restaurants", "four", True),
        ("$4,000", "$400,000", False),
        ("It's 4.", "4", True),
        ("4th place", "4", False),
        ("- lives in the suburbs (moved from Detroit, Apr 2023)", "Detroit", True),  # notes still hold it
        ("- lives in the suburbs (moved from Detroit, Apr 2023)", "the suburbs", True),
        ("- lives in Detroit", "the suburbs", False),
        ("not Detroit", "Detroit", False),
        ("anything", "the", False),  # a value that normalizes to nothing is never conveyed
        ("Seattle, Washington", "Seattle, Washington", True),
    ],
)
def test_conveys_value_cases(text, value, expected) -> None:
    assert conveys_value(text, value) is expected


@pytest.mark.parametrize(
    "text",
    [
        "I don't know.",
        "You haven't mentioned any.",
        "There is no information about Rachel.",
        "That's not in my notes.",
        "I can't tell.",
        "My notes don't say.",
        "I do not have any details about that.",
        "It was never specified.",
        "I'm not sure.",
        "I have no record of that.",
        "Unknown",
    ],
)
def test_says_unknown_positive(text) -> None:
    assert says_unknown(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  ",
        "The suburbs.",
        "You don't have a dog.",
        "You have tried four.",
        "I know it's 4.",
        "Not Detroit.",
    ],
)
def test_says_unknown_negative(text) -> None:
    assert not says_unknown(text)


# --------------------------------------------------------------------------- properties

CITY_GOLDS = [
    "Paris",
    "the suburbs",
    "Lisbon",
    "New York",
    "Seattle, Washington",
    "Kyoto",
    "the Ritz-Carlton",
]
NUMBER_GOLDS = ["4", "four", "$350,000", "25", "twenty-five", "12.5 percent", "1,200"]
OTHER_CITIES = ["London", "Berlin", "Rome", "Madrid", "Osaka", "Denver", "Toronto", "Austin", "Cairo", "Oslo"]
UNRELATED_WORDS = (
    "apple banana river mountain blue green quickly slowly table chair window garden music "
    "yesterday coffee lamp pencil ocean forest cloud yellow gently happy chess violin"
).split()
ARTICLES = ["a", "an", "the"]

any_gold = st.sampled_from(CITY_GOLDS + NUMBER_GOLDS)
stale_penalty = st.floats(min_value=0, max_value=5, allow_nan=False)


def _random_case(draw, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(ch.upper() if flip else ch.lower() for ch, flip in zip(text, flips, strict=True))


@st.composite
def noisy(draw, value: str) -> str:
    """The value with random case, extra whitespace and articles between words, punctuation around it."""
    words = value.split()
    pieces = []
    for word in words:
        if draw(st.booleans()):
            pieces.append(draw(st.sampled_from(ARTICLES)))
        pieces.append(word)
    spaced = "".join(piece + draw(st.sampled_from([" ", "  ", "\t", " \n "])) for piece in pieces).strip()
    prefix = draw(st.sampled_from(["", "  ", '"', "(", "** ", "It's ", "The answer is "]))
    suffix = draw(st.sampled_from(["", ".", "!", "?!", ")", " .", "...", "\n"]))
    return prefix + _random_case(draw, spaced) + suffix


@given(st.text(max_size=80))
@settings(max_examples=300)
def test_normalize_is_idempotent_on_any_text(text) -> None:
    once = normalize(text)
    assert normalize(once) == once


NUMBER_PIECES = [
    "one",
    "hundred",
    "and",
    "thousand",
    "k",
    "$",
    ",",
    "%",
    "first",
    "twenty",
    "zero",
    "5",
    "0.50",
]


@given(st.lists(st.sampled_from(CITY_GOLDS + NUMBER_GOLDS + UNRELATED_WORDS + NUMBER_PIECES), max_size=12))
def test_normalize_is_idempotent_on_number_like_text(pieces) -> None:
    text = " ".join(pieces)
    assert normalize(normalize(text)) == normalize(text)


@given(st.data(), any_gold)
def test_noise_around_the_gold_keeps_it_correct(data, gold) -> None:
    answer = data.draw(noisy(gold))
    assert score_answer(answer, [gold]).verdict == "correct", answer


@given(st.lists(st.sampled_from(UNRELATED_WORDS), max_size=30), any_gold, stale_penalty)
def test_unrelated_words_are_never_correct(words, gold, weight) -> None:
    score = score_answer(" ".join(words), [gold], ["Detroit"], stale_penalty_weight=weight)
    assert score.verdict == "wrong"
    assert not score_answer(" ".join(words) + ".", ABSTENTION_GOLD, is_abstention=True).answered_current


@given(st.data(), st.sampled_from(CITY_GOLDS[:4] + ["Kyoto"]), st.integers(min_value=2, max_value=6))
def test_gold_among_three_or_more_city_candidates_never_scores(data, gold, others) -> None:
    candidates = data.draw(st.permutations([gold, *OTHER_CITIES[:others]]))
    lead = data.draw(st.sampled_from(["", "It could be ", "Maybe ", "Possibly "]))
    if data.draw(st.booleans()):
        answer = (
            lead + ", ".join(candidates[:-1]) + data.draw(st.sampled_from([", or ", " or ", " and ", ", "]))
        )
        answer += candidates[-1]
    else:
        answer = lead + "\n" + "\n".join(f"- {candidate}" for candidate in candidates)
    assert not score_answer(answer, [gold]).answered_current, answer


@given(st.data(), st.integers(min_value=0, max_value=999), st.integers(min_value=2, max_value=6))
def test_gold_among_three_or_more_numbers_never_scores(data, gold, others) -> None:
    pool = data.draw(
        st.lists(
            st.integers(min_value=0, max_value=999).filter(lambda n: n != gold),
            min_size=others,
            max_size=others,
            unique=True,
        )
    )
    candidates = [str(number) for number in data.draw(st.permutations([gold, *pool]))]
    answer = data.draw(st.sampled_from(["", "About ", "It could be "])) + ", ".join(candidates[:-1])
    answer += data.draw(st.sampled_from([" or ", ", ", " and "])) + candidates[-1] + "."
    assert not score_answer(answer, [str(gold)]).answered_current, answer


@given(any_gold, st.lists(st.sampled_from(UNRELATED_WORDS), min_size=1, max_size=20), st.booleans())
def test_padding_beyond_the_cap_never_scores(gold, filler, gold_first) -> None:
    padding = " ".join(filler)
    while len(padding) <= MAX_ANSWER_CHARS:
        padding += " " + padding
    answer = f"{gold}. {padding}" if gold_first else f"{padding}. {gold}"
    assert not score_answer(answer, [gold]).answered_current


@given(
    st.lists(
        st.sampled_from(UNRELATED_WORDS + CITY_GOLDS + NUMBER_GOLDS + ["Detroit", "not", "or", ",", "."]),
        max_size=15,
    ),
    any_gold,
    stale_penalty,
    st.booleans(),
)
def test_reward_is_bounded_and_verdict_matches_flags(words, gold, weight, abstention) -> None:
    score = score_answer(
        " ".join(words),
        [gold],
        ["Detroit", "$400,000"],
        is_abstention=abstention,
        stale_penalty_weight=weight,
    )
    assert -weight <= score.reward <= 1
    flags_reward = float(score.answered_current) - weight * float(score.asserted_stale)
    if score.verdict == "ambiguous":  # naming the current and a stale value earns nothing (issue 26 item 4)
        flags_reward = min(flags_reward, 0.0)
    assert score.reward == pytest.approx(flags_reward)
    expected = {
        (True, False): "correct",
        (False, True): "stale",
        (True, True): "ambiguous",
        (False, False): "wrong",
    }
    if score.reason == "hedged" and score.asserted_stale:
        assert score.verdict == "ambiguous"  # a hedged list holding the gold and a stale value
    else:
        assert score.verdict == expected[(score.answered_current, score.asserted_stale)]


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=10**9))
def test_amounts_match_whole_tokens_only(value, other) -> None:
    assume(value != other)
    assert conveys_value(f"${value:,}", f"{value} dollars")
    assert conveys_value(f"It is {value:,}.", f"${value:,}")
    assert not conveys_value(f"${other:,}", f"${value:,}")


def _spell(number: int) -> str:
    """English words for 0 <= number < 10**6 (test oracle for the number-word reader)."""
    units = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    units += "sixteen seventeen eighteen nineteen"
    small = units.split()
    tens = "twenty thirty forty fifty sixty seventy eighty ninety".split()

    def below_thousand(n: int) -> list[str]:
        words = []
        if n >= 100:
            words += [small[n // 100], "hundred"]
            n %= 100
            if n:
                words.append("and")
        if n >= 20:
            words.append(tens[n // 10 - 2] + (f"-{small[n % 10]}" if n % 10 else ""))
        elif n or not words:
            words.append(small[n])
        return words

    if number >= 1000:
        rest = number % 1000
        return " ".join(
            below_thousand(number // 1000) + ["thousand"] + (below_thousand(rest) if rest else [])
        )
    return " ".join(below_thousand(number))


@given(st.integers(min_value=0, max_value=999_999))
def test_spelled_numbers_equal_digits(number) -> None:
    assert normalize(_spell(number)) == str(number)
    assert score_answer(_spell(number).capitalize() + ".", [f"{number:,}"]).verdict == "correct"


HEDGE_TEMPLATES = [
    "Either {a} or {b}.",
    "{a} or {b}",
    "{a}, {b}",
    "Previously {a}, now {b}.",
    "{a} then {b}",
    "It was {a} before; it is {b} now.",
    "{b} (it used to be {a})",
    "{a}, or maybe {b}",
    "You live in {a} and {b}.",
    "Not {a}. {b}.",
]


@given(
    st.sampled_from(HEDGE_TEMPLATES),
    st.lists(
        st.sampled_from(CITY_GOLDS[:5] + OTHER_CITIES + ["$350,000", "$400,000", "4", "five"]),
        min_size=2,
        max_size=2,
        unique=True,
    ),
)
def test_mentioning_both_values_never_beats_committing_to_one(template, values) -> None:
    """Summed over which of the two is current, a two-value answer earns at most what "{b}" alone does (0)."""
    first, second = values
    assume(normalize(first) != normalize(second))
    answer = template.format(a=first, b=second)
    total = score_answer(answer, [first], [second]).reward + score_answer(answer, [second], [first]).reward
    committed = (
        score_answer(second, [first], [second]).reward + score_answer(second, [second], [first]).reward
    )
    assert committed == 0.0
    assert total <= committed, answer


def test_score_episode_answer_uses_the_episode_fields() -> None:
    from supersede_lib.agent.episode import Episode
    from supersede_lib.eval.matcher import score_episode_answer

    episode = Episode(
        episode_id="e",
        sessions=(),
        question="Where do I live now?",
        question_date="2023/06/01 (Thu) 10:00",
        gold_answers=("the suburbs",),
        superseded_values=("Detroit",),
    )
    assert score_episode_answer(episode, "The suburbs.").verdict == "correct"
    stale = score_episode_answer(episode, "Detroit", stale_penalty_weight=0.5)
    assert stale.verdict == "stale" and stale.reward == -0.5


# --------------------------------------------------------------------------- issue 10: misgraded classes

LABELLED_CLASSES = [
    # (answer, gold, superseded, asks_previous_value, verdict): one per class the human labels exposed
    ("You live in Austin (moved from Detroit, Apr 2023).", ("Austin",), ("Detroit",), False, "correct"),
    (
        "The cat's name is Olive (moved from Biscuit, July 5, 2023).",
        ("Olive",),
        ("Biscuit",),
        False,
        "correct",
    ),
    ("Olive (renamed July 5, 2023).", ("Olive",), ("Biscuit",), False, "correct"),
    ("You drove a Volvo XC40 before your latest one.", ("Honda Civic",), ("Volvo XC40",), True, "stale"),
    ("You drove a Honda Civic before your latest one.", ("Honda Civic",), ("Volvo XC40",), True, "correct"),
    ("I was living in Boston before I moved to Minneapolis.", ("Boston",), ("Minneapolis",), True, "correct"),
    (
        "The budget was $3,000 (raised by $41,500, not $43,500).",
        ("$44,500",),
        ("$41,500", "$43,500"),
        True,
        "wrong",
    ),
    ("The budget was $3,000, raised by $41,500.", ("$44,500",), ("$41,500",), True, "wrong"),
    (
        "The Xfinity Mobile SIM arrived and I'm finally free of T-Mobile.",
        ("Xfinity Mobile",),
        ("T-Mobile",),
        False,
        "correct",
    ),
    ("I'm with Xfinity Mobile; I left T-Mobile.", ("Xfinity Mobile",), ("T-Mobile",), False, "correct"),
    (
        "Xfinity Mobile. I quit T-Mobile and cancelled US Mobile.",
        ("Xfinity Mobile",),
        ("T-Mobile", "US Mobile"),
        False,
        "correct",
    ),
    ("You switched away from Verizon; you're on Google Fi.", ("Google Fi",), ("Verizon",), False, "correct"),
    ("You left Austin for Denver.", ("Denver",), ("Austin",), False, "correct"),
    ("Wed", ("Friday", "Fridays"), ("Wednesday", "Wednesdays"), False, "stale"),
    ("Fri", ("Friday", "Fridays"), ("Wednesday", "Wednesdays"), False, "correct"),
    ("Thurs.", ("Thursday",), (), False, "correct"),
    ("The car you drive is a Chevrolet Bolt.", ("Nissan Leaf",), ("Chevy Bolt",), False, "stale"),
    # a make alone names the one car of the episode it starts (the labels' convention, ans-1139; v2) ...
    ("A Chevy.", ("Chevrolet Bolt",), (), False, "correct"),
    ("A Chevy.", ("Chevrolet Bolt",), ("Chevrolet Malibu",), False, "wrong"),  # ... not one of two
    ("A VW Golf.", ("Volkswagen Golf",), (), False, "correct"),
    ("I sat at home.", ("Saturday",), (), False, "wrong"),  # lower-case "sat" is the verb
    ("2023/04/17 (Mon) 21:04", ("Friday",), ("Monday",), True, "wrong"),  # an echoed time stamp
]


@pytest.mark.parametrize(("answer", "gold", "stale", "previous", "verdict"), LABELLED_CLASSES)
def test_issue_10_classes(answer, gold, stale, previous, verdict) -> None:
    assert score_answer(answer, gold, stale, asks_previous_value=previous).verdict == verdict


GAMING_ANSWERS = [
    "Denver and Boston",
    "Denver; Boston",
    "It could be Denver. It could also be Boston.",
    "Denver, maybe Boston.",
    "Denver. Boston.",
    "Denver was never mentioned.",
    "Denver is wrong.",
    "I doubt it's Denver.",
    "Anything but Denver.",
    "Did you move to Denver?",
    "Q: Did I move to Denver? A: I'm not sure.",
    "You used to live in Denver.",
]


@pytest.mark.parametrize("answer", GAMING_ANSWERS)
def test_gaming_answers_earn_nothing(answer) -> None:
    score = score_answer(answer, ["Denver"], ["Austin"])
    assert not score.answered_current and score.reward <= 0, score


@pytest.mark.parametrize(
    "answer", ["5 or more", "5 or fewer", "at most 5", "5 plus", "4 and 5", "4; 5 or so"]
)
def test_qualified_or_paired_numbers_earn_nothing(answer) -> None:
    assert not score_answer(answer, ["5"], ["3"]).answered_current


@pytest.mark.parametrize(
    "answer",
    [
        "You live in Denver, Colorado.",
        "Denver?",
        "You live in Denver and love it.",
        "You live in Denver and work at Stripe.",
        "Denver. Enjoy!",
        "Your home city is Denver (previously Austin).",
        "You live in Denver. Austin was your previous city.",
        "You live in Denver, and before that Austin.",
        "It's Denver, not Austin anymore.",
        "Did you say Denver? Yes, you live in Denver.",
    ],
)
def test_ordinary_detail_is_not_gaming(answer) -> None:
    assert score_answer(answer, ["Denver"], ["Austin"]).verdict == "correct"


# --------------------------------------------------------------------------- properties: ungameable

SINGLE_CITIES = ["Denver", "Austin", "Boston", "Lisbon", "Kyoto", "Cairo", "Oslo", "Toronto", "Madrid"]
RIVAL_NUMBERS = ["7", "nine", "$400,000", "31", "1,500"]
STRONG_SEPARATORS = [" and ", " or ", "; ", "\n- ", ", maybe ", ", or possibly ", ". It could also be "]


@st.composite
def gold_and_rivals(draw, min_rivals: int = 1):
    """A gold and distinct rivals of its kind (cities for names, numbers for amounts)."""
    if draw(st.booleans()):
        gold = draw(st.sampled_from(CITY_GOLDS))
        pool = [city for city in SINGLE_CITIES if normalize(city) not in normalize(gold)]
    else:
        gold = draw(st.sampled_from(NUMBER_GOLDS))
        pool = [number for number in RIVAL_NUMBERS if normalize(number) not in normalize(gold).split()]
    rivals = draw(st.lists(st.sampled_from(pool), min_size=min_rivals, max_size=4, unique=True))
    return gold, rivals


@given(gold_and_rivals(), st.booleans(), st.data())
def test_listing_every_candidate_never_scores(case, rivals_are_history, data) -> None:
    gold, rivals = case
    candidates = data.draw(st.permutations([gold, *rivals]))
    separator = data.draw(st.sampled_from(STRONG_SEPARATORS))
    answer = data.draw(st.sampled_from(["", "It could be ", "Maybe ", "You live in "])) + separator.join(
        candidates
    )
    superseded = rivals if rivals_are_history else []
    assert score_answer(answer, [gold], superseded).reward < 1, answer


@given(gold_and_rivals(), st.integers(min_value=2, max_value=4), st.data())
def test_repeating_the_gold_beside_a_rival_never_scores(case, repeats, data) -> None:
    gold, rivals = case
    pieces = data.draw(st.permutations([gold] * repeats + [rivals[0]]))
    answer = data.draw(st.sampled_from(["; ", " and ", "\n", ". ", ", or "])).join(pieces)
    assert score_answer(answer, [gold], data.draw(st.sampled_from([[], rivals]))).reward < 1, answer


NEGATED_TEMPLATES = [
    "Not {g}.",
    "It's not {g}.",
    "It isn't {g}.",
    "{g} is wrong.",
    "{g} is not correct.",
    "{g} was never mentioned.",
    "I doubt it's {g}.",
    "I doubt that the answer is {g}.",
    "Anything but {g}.",
    "Definitely not {g}.",
    "It is no longer {g}.",
    "You used to have {g}.",
    "It used to be {g}.",
]


@given(st.sampled_from(NEGATED_TEMPLATES), any_gold, st.sampled_from([[], ["Austin"], ["7"]]))
def test_negated_gold_never_scores(template, gold, superseded) -> None:
    answer = template.format(g=gold)
    assert not score_answer(answer, [gold], superseded).answered_current, answer


QUESTION_TEMPLATES = [
    "Did you move to {g}?",
    "Is it {g}?",
    'You asked: "Is it {g}?"',
    "Q: Was it {g}? A: I'm not sure.",
    "Could it be {g}? I don't know.",
    "Where do you live now, {g}?",
    "What about {g}?",
]


@given(st.sampled_from(QUESTION_TEMPLATES), any_gold)
def test_gold_only_inside_a_question_never_scores(template, gold) -> None:
    answer = template.format(g=gold)
    assert not score_answer(answer, [gold], ["Austin"]).answered_current, answer


CORRECT_TEMPLATES = [
    "{g}",
    "{g}.",
    "It's {g}.",
    "The answer is {g}.",
    "Based on my notes, it is {g}.",
    "According to the conversation, it's {g}.",
    "{g} (since May 2023).",
    "{g}, as of June 5, 2023.",
    "Currently {g}.",
    "It is {g} now.",
    "{g}, not {s}.",
    "Not {s}: {g}.",
    "{g}; it used to be {s}.",
    "It went from {s} to {g}.",
    "{g} (moved from {s}, Apr 2023).",
    "Now {g}, previously {s}.",
    "It used to be {s}, but now it is {g}.",
    "{s}, then {g}.",
    "It is {g} instead of {s}.",
    "{g}! Congratulations.",
    "I think it's {g}.",
]


@given(st.sampled_from(CORRECT_TEMPLATES), gold_and_rivals())
def test_plain_correct_answers_in_many_phrasings_score(template, case) -> None:
    gold, rivals = case
    answer = template.format(g=gold, s=rivals[0])
    assert score_answer(answer, [gold], [rivals[0]]).verdict == "correct", answer


PREVIOUS_TEMPLATES = [
    "{g}.",
    "It was {g} before it changed to {s}.",
    "Before {s}, it was {g}.",
    "Previously {g}; now {s}.",
    "It used to be {g}.",
    "It was {g}, then {s}.",
]


@given(st.sampled_from(PREVIOUS_TEMPLATES), gold_and_rivals())
def test_previous_value_answers_in_many_phrasings_score(template, case) -> None:
    gold, rivals = case
    answer = template.format(g=gold, s=rivals[0])
    assert score_answer(answer, [gold], [rivals[0]], asks_previous_value=True).verdict == "correct", answer


@pytest.mark.parametrize(
    "answer",
    [
        "Denver (since 2024/03/02).",
        "You moved to Denver on 2024-03-02.",
        "Denver (2023/04/17 (Mon) 21:04)",
        "As of 2023/04/17 (Mon) 21:04 you live in Denver.",
    ],
)
def test_numeric_dates_and_time_stamps_beside_the_answer_are_not_rival_candidates(answer) -> None:
    assert score_answer(answer, ["Denver"], ["Austin"]).verdict == "correct"


def test_a_weekday_inside_a_numeric_time_stamp_is_not_a_day_answer() -> None:
    score = score_answer("The class is on Wed (2023/04/17 (Mon) 21:04).", ["Wednesday"], ["Monday"])
    assert score.verdict == "correct"


def test_a_numeric_date_still_matches_a_date_gold_written_in_words() -> None:
    assert score_answer("It was on 2023/05/30.", ["May 30, 2023"], ["2023/04/01"]).verdict == "correct"
    assert score_answer("It was on 2023/04/01.", ["May 30, 2023"], ["2023/04/01"]).verdict == "stale"


def test_a_full_date_written_beside_a_weekday_answer_is_not_a_rival_weekday() -> None:
    gold, stale = ["Wednesday", "Wed"], ["Sunday"]
    assert score_answer("The piano lesson is on Wednesday, April 19, 2023.", gold, stale).verdict == "correct"
    assert score_answer("Wednesday (April 19, 2023)", gold, stale).verdict == "correct"
    assert score_answer("Wednesday or Sunday", gold, stale).verdict == "ambiguous"
    assert score_answer("Wednesday, maybe Friday", gold, stale).reward < 1
    assert score_answer("It was on Sunday, April 16, 2023.", gold, stale).verdict == "stale"


def test_the_day_of_a_date_is_not_a_count() -> None:
    # a 0.5B answered a count question with an echoed time stamp (offline 03); "04" is June's 4th
    assert score_answer("2023/06/04 (Sun) 07:32", ["6", "six"], ["4", "four"]).verdict == "wrong"
    assert score_answer("You tried 4 shops by 2023/06/06.", ["6"], ["4"]).verdict == "stale"
    assert score_answer("On June 4 you had tried 6 shops.", ["6"], ["4"]).verdict == "correct"


def test_a_hedged_list_of_current_and_stale_values_is_ambiguous_and_earns_nothing() -> None:
    answer = "I have been spending my free time on calligraphy, group classes, salsa dancing, and reading."
    score = score_answer(answer, ["salsa dancing"], ["calligraphy"])
    assert (score.verdict, score.reason, score.answered_current) == ("ambiguous", "hedged", False)
    assert score.reward == -1.0
    assert (
        score_answer("Paris, London or Berlin", ["Paris"]).verdict == "wrong"
    )  # no stale value: a guess list
