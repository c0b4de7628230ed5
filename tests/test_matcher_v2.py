"""Matcher v2 (issue 26, item 5; docs/preregistration.md, "Matcher v2"): three general rules for the
families the frozen matcher missed on trained answers, each with hand-written cases and controls.

- A value that owns the subject's thing is not the answer: "Jonah's gift is thoughtful" says what a
  gift is, and Jonah only whose it is.
- A value standing where the user stands in the question is not the answer: "Deloitte works for
  Kansas City" for "Which company do I work for?" puts Deloitte in the worker's place.
- A whole answer that is a short form of exactly one value names that value: a name by its first
  words ("Honda" for Honda CR-V), a lower-case noun phrase by its head ("Manager" for operations
  manager), as the labels read them (labels README, ans-1139).

They were written on labels outside the pre-registered test and hard sets (batch S1 and the
exploratory adapters' answers): development data, not evidence that they generalise. Batch S2 measures them.

Matcher v3 (docs/preregistration.md, "Matcher v3") adds two rules written on S2's misses, measured on
batch S3:

- A short name joined by an ampersand is one token: "AT&T" is not the words "at" and "t", so "t" and
  the question's "mobile" no longer find T-Mobile.
- A value opening an apposition to another value only describes it: "Chewy, a Salesforce company"
  gives Chewy.

Matcher v4 (docs/preregistration.md, "Matcher v4") adds two rules written on S3's misses, measured on
batch S4:

- A value that is the whole subject of a relation to a named person is that person's partner, not the
  user's: "Elena is dating Dev."
- An activity's bare stem names it: "Woodwork workshops" for woodworking, as "woodworker" does.

Matcher v5 (docs/preregistration.md, "Matcher v5") adds rules written on S4's misses, measured on
batch S5: a clock time written with a period, a session stamp's clock, a rate worked out from the
answer and a number the question names are no rival values; a web address reads as its name; a
one-word name may be written as two; "are over" ends a value; a notes key that its own line repeats
only labels the line. After adoption a property test (the last below) found hedges of two times graded
correct: one v5 opened (a rate offered as an alternative) and two older (a second time sharing a number
with the gold's, or running into it across a list break); another found notes lines that write the asked
key twice with two names graded correct (older). All closed without changing any verdict on a labelled or
recorded answer.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supersede_lib.eval.matcher import score_answer

PARTNER = "What's my partner's name?"
EMPLOYER = "Which company do I work for?"
CAR = "What vehicle do I own right now?"
TITLE = "What's my job title?"
HOBBY = "What hobby am I into these days?"

# (answer, gold, stale, question, verdict)
OWNER_CASES = [
    ("Jonah's gift is thoughtful.", ["Jonah"], ["Theo"], PARTNER, "wrong"),
    ("Leila's dinner ideas are current.", ["Leila"], ["Sofia"], PARTNER, "wrong"),
    ("Kenji's partner's name is Tom.", ["Kenji"], ["Marcus"], PARTNER, "wrong"),
    (
        "Elena's gift is thoughtful, so Isaac is the current partner.",
        ["Isaac"],
        ["Elena"],
        PARTNER,
        "correct",
    ),
    (
        "Marcus is the current partner, as Elena's date ideas are fun.",
        ["Elena"],
        ["Marcus"],
        PARTNER,
        "stale",
    ),
    # controls: a value that owns its own name, one that is not the subject, a user word, a plain subject
    ("Ziggy's name is current.", ["Ziggy"], ["Mochi"], "What's my cat's name?", "correct"),
    ("I am Zillow's newest hire.", ["Zillow"], ["Accenture"], EMPLOYER, "correct"),
    ("My partner Jonah's gift is thoughtful.", ["Jonah"], ["Theo"], PARTNER, "correct"),
    ("Jonah is current.", ["Jonah"], ["Theo"], PARTNER, "correct"),
    ("Jonah's.", ["Jonah"], ["Theo"], PARTNER, "correct"),
]

ACTOR_CASES = [
    ("Deloitte works for Kansas City.", ["Deloitte"], ["Pfizer"], EMPLOYER, "wrong"),
    ("Pfizer currently works at a lab.", ["Deloitte"], ["Pfizer"], EMPLOYER, "wrong"),
    ("Denver lives in Colorado.", ["Denver"], ["Austin"], "Which city do I live in?", "wrong"),
    # controls: the user in the sentence, the value as the object, a verb the question does not use
    ("Deloitte is where I work.", ["Deloitte"], ["Pfizer"], EMPLOYER, "correct"),
    ("I work for Deloitte.", ["Deloitte"], ["Pfizer"], EMPLOYER, "correct"),
    ("Deloitte hires for Kansas City.", ["Deloitte"], ["Pfizer"], EMPLOYER, "correct"),
    ("Deloitte works.", ["Deloitte"], ["Pfizer"], EMPLOYER, "correct"),
]

SHORT_FORM_CASES = [
    ("Honda is current.", ["Honda CR-V"], ["Mazda CX-5"], CAR, "correct"),
    ("jeep", ["Ford F-150"], ["Jeep Wrangler"], CAR, "stale"),
    ("car: Honda", ["Honda CR-V"], ["Mazda CX-5"], CAR, "correct"),
    ("I own a Jeep.", ["Ford F-150"], ["Jeep Wrangler"], CAR, "stale"),
    ("Honda is current on 2023/03/04 (Sat).", ["Honda CR-V"], ["Mazda CX-5"], CAR, "correct"),
    ("Painting is current.", ["knitting"], ["watercolor painting"], HOBBY, "stale"),
    ("Manager", ["financial analyst"], ["operations manager"], TITLE, "stale"),
    ("data analyst", ["HR business partner"], ["financial analyst", "senior data analyst"], TITLE, "stale"),
    # controls: a make two values share, a head two values share, a name's last word, a lower-case
    # value's first word, the question's own word, a denial, a question, a fragment, a longer answer
    ("Honda is current.", ["Honda CR-V"], ["Honda Civic"], CAR, "wrong"),
    ("Analyst is current.", ["financial analyst"], ["data analyst"], TITLE, "wrong"),
    ("Fitness is current.", ["Planet Fitness"], ["Crunch"], "Which gym do I go to?", "wrong"),
    ("watercolor", ["knitting"], ["watercolor painting"], HOBBY, "wrong"),
    ("Hobby is current.", ["knitting"], ["watercolor painting"], HOBBY, "wrong"),
    ("Not Honda.", ["Honda CR-V"], ["Mazda CX-5"], CAR, "wrong"),
    ("Honda?", ["Honda CR-V"], ["Mazda CX-5"], CAR, "wrong"),
    ("CR", ["Honda CR-V"], ["Mazda CX-5"], CAR, "wrong"),
    ("Honda makes good engines and Mazda too.", ["Honda CR-V"], ["Mazda CX-5"], CAR, "wrong"),
    ("car: Honda\ngym: Equinox", ["Honda CR-V"], ["Mazda CX-5"], CAR, "wrong"),
]


CARRIER = "Which mobile carrier am I with?"

AMPERSAND_CASES = [
    ("The mobile carrier I am with is AT&T.", ["AT&T"], ["T-Mobile"], CARRIER, "correct"),
    ("at&t", ["AT&T"], ["T-Mobile"], CARRIER, "correct"),
    ("I left AT&T for T-Mobile.", ["T-Mobile"], ["AT&T"], CARRIER, "correct"),
    # controls: the old carrier named alone, both named, a value the ampersand does not touch
    ("T-Mobile", ["AT&T"], ["T-Mobile"], CARRIER, "stale"),
    ("AT&T or T-Mobile", ["AT&T"], ["T-Mobile"], CARRIER, "ambiguous"),
    ("I shop at H&M.", ["Zara"], ["Uniqlo"], "Where do I buy clothes?", "wrong"),
]

APPOSITION_CASES = [
    ("I am employed at Chewy, a Salesforce company.", ["Chewy"], ["Salesforce"], EMPLOYER, "correct"),
    ("Salesforce, a Chewy company.", ["Chewy"], ["Salesforce"], EMPLOYER, "stale"),
    ("employer: Chewy, a Salesforce company", ["Chewy"], ["Salesforce"], EMPLOYER, "correct"),
    # controls: a bare list, a list that goes on, a denial
    ("Chewy, Salesforce.", ["Chewy"], ["Salesforce"], EMPLOYER, "ambiguous"),
    (
        "Chewy, Salesforce and Google are all big employers here.",
        ["Chewy"],
        ["Salesforce"],
        EMPLOYER,
        "ambiguous",
    ),
    ("Chewy, not Salesforce.", ["Chewy"], ["Salesforce"], EMPLOYER, "correct"),
]


DATING = "Who am I dating right now?"
FUN = "What do I do for fun at the moment?"

RELATION_CASES = [
    ("Elena is dating Dev.", ["Elena"], ["Nadia"], DATING, "wrong"),
    ("Elena is married to Dev.", ["Elena"], ["Nadia"], DATING, "wrong"),
    ("Camila is dating Sarah.", ["Marcus"], ["Camila"], DATING, "wrong"),
    # controls: the user in the clause, no one named, the value as the object, the user's own relation
    ("Elena is dating me.", ["Elena"], ["Nadia"], DATING, "correct"),
    ("Elena is dating.", ["Elena"], ["Nadia"], DATING, "correct"),
    ("Elena is seeing someone.", ["Elena"], ["Nadia"], DATING, "correct"),
    ("I am dating Elena.", ["Elena"], ["Nadia"], DATING, "correct"),
    ("Elena is my partner and she is dating Dev.", ["Elena"], ["Nadia"], DATING, "correct"),
]

ACTIVITY_STEM_CASES = [
    ("Woodwork workshops are current.", ["woodworking"], ["archery"], FUN, "correct"),
    ("Garden club", ["gardening"], ["archery"], FUN, "correct"),
    ("I like archery and woodwork.", ["woodworking"], ["archery"], FUN, "ambiguous"),
    # controls: a stem of no value, a stem too short to name anything, a capitalised name
    ("Garden club", ["woodworking"], ["archery"], FUN, "wrong"),
    ("Bak sale", ["baking"], ["archery"], FUN, "wrong"),
    ("Climb", ["Empire State Climbing"], ["archery"], FUN, "wrong"),
]


TEN_K = "How fast is my best 10K so far?"
FIVE_K = "What's my personal best 5K time?"
HALF_MARATHONS = "What's my running total of half marathons run?"
WORKPLACE = "Where do I work at the moment?"
GYM = "Where do I work out these days?"

CLOCK_PERIOD_CASES = [
    ("52.13", ["52:13"], ["53:00"], TEN_K, "correct"),
    ("My best 10K is 53.00.", ["52:13"], ["53:00"], TEN_K, "stale"),
    # controls: an amount keeps its period; so does a number where no value is a clock time
    ("$52.13", ["52:13"], ["53:00"], TEN_K, "wrong"),
    ("My budget is 52.13.", ["52"], ["53"], "What's my monthly grocery budget?", "wrong"),
]

STAMP_CLOCK_CASES = [
    ("running count: 4 half marathons (Thu) 08:05", ["5"], ["4"], HALF_MARATHONS, "stale"),
    ("Your fastest 5K is 30:20, logged on 2023/05/29 (Mon) at 20:0", ["30:20"], ["30:51"], FIVE_K, "correct"),
    # control: a clock time after no weekday is still read
    ("4 half marathons, 08:05", ["5"], ["4"], HALF_MARATHONS, "ambiguous"),
]

RATE_AND_QUESTION_NUMBER_CASES = [
    ("The fastest 10K is 52:13, which is 2.4 minutes per mile.", ["52:13"], ["53:00"], TEN_K, "correct"),
    ("My best 5K is currently 30:14, which is 1 week ahead.", ["30:14"], ["30:49"], FIVE_K, "correct"),
    # controls: a number that is no rate, a list of times, a rival rate where the gold is a rate
    ("The fastest 10K is 52:13 or 2.4 minutes.", ["52:13"], ["53:00"], TEN_K, "wrong"),
    ("30:14, 31:02 or 29:55", ["30:14"], ["30:49"], FIVE_K, "wrong"),
    (
        "9 minutes per mile, maybe 8 minutes per mile",
        ["9 minutes per mile"],
        ["10 minutes per mile"],
        "",
        "wrong",
    ),
    # and rates offered as alternatives, not worked out from the answer, stay candidates
    ("30:14 per race or 31:02 per race", ["31:02"], ["30:49"], FIVE_K, "wrong"),
    ("Maybe 30:14 per race, maybe 31:02 per race", ["30:14"], ["30:49"], FIVE_K, "wrong"),
    # a second time that shares a number with the gold's is still a second time
    ("30:14 or 30:15", ["30:14"], ["30:49"], FIVE_K, "wrong"),
    ("20:21 or 21:19", ["21:19"], ["30:49"], FIVE_K, "wrong"),
    ("20:20; 20:00", ["20:20"], ["30:49"], FIVE_K, "wrong"),
]

WEB_ADDRESS_CASES = [
    ("company website: https://www.pfizer.com", ["Pfizer"], ["Atlassian"], WORKPLACE, "correct"),
    ("I work at atlassian.com", ["Pfizer"], ["Atlassian"], WORKPLACE, "stale"),
    # control: an address names its host, not its path
    ("See https://www.example.com/pfizer-news", ["Pfizer"], ["Atlassian"], WORKPLACE, "wrong"),
]

SPLIT_WORD_CASES = [
    ("You go to any time Fitness.", ["Anytime Fitness"], ["YMCA"], GYM, "correct"),
    ("Bee keeping", ["beekeeping"], ["archery"], FUN, "correct"),
    # controls: the split word alone, the name without it
    ("any time you like", ["Anytime Fitness"], ["YMCA"], GYM, "wrong"),
    ("Go to Fitness.", ["Anytime Fitness"], ["YMCA"], GYM, "wrong"),
]

ENDING_CASES = [
    ("Partner: Amara. Things with Theo are over.", ["Amara"], ["Theo"], DATING, "correct"),
    ("Theo is over.", ["Amara"], ["Theo"], DATING, "wrong"),
    # control: "over" that goes on ends nothing
    ("Amara is over the moon.", ["Amara"], ["Theo"], DATING, "correct"),
]

KEY_ECHO_CASES = [
    ("Things with Theo: things with Theo are over\nPartner: Amara", ["Amara"], ["Theo"], DATING, "correct"),
    # controls: a key its line does not repeat, a line that repeats its key and asserts it
    ("Theo: things are over\nPartner: Amara", ["Amara"], ["Theo"], DATING, "ambiguous"),
    ("Theo: Theo\nPartner: Amara", ["Amara"], ["Theo"], DATING, "ambiguous"),
]


SAME_KEY_CASES = [
    ("partner: Amara\npartner: Theo", ["Amara"], ["Zed"], DATING, "wrong"),
    ("partner: Amara\nex: Theo\npartner: Theo", ["Theo"], ["Zed"], DATING, "wrong"),
    # controls: lines under other keys, the same value twice
    ("partner: Amara\nex: Theo", ["Amara"], ["Zed"], DATING, "correct"),
    ("partner: Amara\npartner: Amara", ["Amara"], ["Zed"], DATING, "correct"),
]


RULES = {
    "two lines under the same key offer two values (v5 hardening)": SAME_KEY_CASES,
    "a clock time may be written with a period": CLOCK_PERIOD_CASES,
    "a session stamp's clock is no value": STAMP_CLOCK_CASES,
    "a rate or a number the question names is no rival": RATE_AND_QUESTION_NUMBER_CASES,
    "a web address reads as its name": WEB_ADDRESS_CASES,
    "a one-word name may be written as two": SPLIT_WORD_CASES,
    "are over ends a value": ENDING_CASES,
    "a key its line repeats only labels the line": KEY_ECHO_CASES,
    "a value in a relation with another person is not the user's": RELATION_CASES,
    "an activity's bare stem names it": ACTIVITY_STEM_CASES,
    "a short name with an ampersand is one word": AMPERSAND_CASES,
    "a value opening an apposition only describes the value before it": APPOSITION_CASES,
    "a value that owns the subject is not the answer": OWNER_CASES,
    "a value doing the asked act is not the answer": ACTOR_CASES,
    "a whole answer that is one value's short form names it": SHORT_FORM_CASES,
}
"""Each rule's cases and controls; the test id names the rule, so a failure says which rule broke."""


@pytest.mark.parametrize(
    ("answer", "gold", "stale", "question", "verdict"),
    [pytest.param(*case, id=f"{rule}: {case[0]}") for rule, cases in RULES.items() for case in cases],
)
def test_each_rule_gives_its_cases_verdict(answer, gold, stale, question, verdict) -> None:
    assert score_answer(answer, gold, stale, question=question).verdict == verdict


MAKES = st.sampled_from(["Honda", "Toyota", "Subaru", "Hyundai", "Mazda", "Jeep"])
MODELS = st.sampled_from(["Civic", "Outback", "Ioniq", "Prius", "Wrangler", "Telluride"])


@given(current_make=MAKES, old_make=MAKES, current_model=MODELS, old_model=MODELS)
def test_a_make_alone_names_a_car_only_when_no_other_car_shares_it(
    current_make: str, old_make: str, current_model: str, old_model: str
) -> None:
    """The property behind the short-form rule: the make names the current car, the old car or
    nothing, and never credits a make both cars share."""
    gold, stale = f"{current_make} {current_model}", f"{old_make} {old_model}"
    verdict = score_answer(f"{current_make} is current.", [gold], [stale], question=CAR).verdict
    if gold == stale:
        return
    assert verdict == ("wrong" if current_make == old_make else "correct")


CLOCK_TIMES = st.tuples(st.integers(20, 59), st.integers(0, 59)).map(lambda time: f"{time[0]}:{time[1]:02d}")
SUFFIXES = st.sampled_from(["", " per race", " per mile", " (Mon)", " minutes"])
JOINS = st.sampled_from([" or ", ", maybe ", "; ", " and "])


@given(first=CLOCK_TIMES, second=CLOCK_TIMES, suffix=SUFFIXES, join=JOINS)
def test_two_times_offered_together_earn_no_credit_whichever_is_current(
    first: str, second: str, suffix: str, join: str
) -> None:
    """The reward is the matcher: a policy that names two times with any decoration (v5 reads rates and
    session stamps apart from values) is never graded correct whichever of them is current, even when the
    two share a number ("30:14 or 30:15": a hole older than v5, closed with it)."""
    if first == second:
        return
    answer = f"{first}{suffix}{join}{second}{suffix}"
    for gold in (first, second):
        assert score_answer(answer, [gold], ["19:00"], question=FIVE_K).verdict != "correct", (answer, gold)


NAMES = st.sampled_from(["Amara", "Theo", "Hannah", "Rafael", "Kenji", "Nadia"])
KEYS = st.sampled_from(["partner", "current partner", "dating", "name"])
OTHER_LINES = st.sampled_from(["", "gym: Blink Fitness\n", "ex: Marcus\n"])


@given(first=NAMES, second=NAMES, key=KEYS, between=OTHER_LINES)
def test_two_names_under_one_key_earn_no_credit_whichever_is_current(
    first: str, second: str, key: str, between: str
) -> None:
    """A notes dump that writes the asked key twice with two names hedges, whatever lies between."""
    if first == second:
        return
    answer = f"{key}: {first}\n{between}{key}: {second}"
    for gold in (first, second):
        assert score_answer(answer, [gold], ["Zed"], question=DATING).verdict != "correct", (answer, gold)


TWO_VALUE_FORMS = [
    "{a}\npartner: {b}",
    "partner: {a}\nnew partner: {b}",
    "{a} is my partner. {b} is my partner.",
    "You are dating {a}. You are dating {b}.",
    "It's {a}. It's {b}.",
    "{a} & {b}",
]
"""Forms that name two values and that the hedge rules do not read as hedges: with a value from outside
the history beside the gold they are graded correct (docs/preregistration.md, "Matcher v5")."""


@pytest.mark.parametrize("form", TWO_VALUE_FORMS)
def test_two_value_forms_the_hedge_rules_miss_never_pay_beside_the_superseded_value(form: str) -> None:
    """In the environment the alternative a policy could hedge with is the superseded value, and naming
    it beside the current one is ambiguous and earns nothing, in either order."""
    for answer in (form.format(a="Amara", b="Theo"), form.format(a="Theo", b="Amara")):
        score = score_answer(answer, ["Amara"], ["Theo"], question=DATING)
        assert score.verdict == "ambiguous" and score.reward <= 0, answer
