"""Whose value an answer gives (issue 26, item 5): general rules found on the trained adapters' answers.

Two kinds of answer the trained adapters wrote that the matcher misread. A person who names themselves
by an activity names the activity ("I'm a knitter" holds the hobby knitting). And a value said of
someone or something else answers nothing about the user: "Kenji is dating Sofia", "The phone carrier
Rafael uses is US Mobile", "The trainer is a member of CorePower Yoga". Each rule has hand-written
cases, controls that must keep their verdict, and a hypothesis property over names, roles and values.
The labelled answers these came from (labels README, "Agreement on trained answers") are development
data for these rules, not evidence that they generalise.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supersede_lib.eval.matcher import conveys_value, score_answer
from supersede_lib.eval.matcher.stems import agent_nouns

HOBBY_QUESTION = "What hobby am I into these days?"
GYM_QUESTION = "What gym am I a member of?"

# (answer, gold, stale, verdict)
AGENT_NOUN_CASES = [
    ("I'm a knitter.", ["knitting"], [], "correct"),
    ("You're a beekeeper now.", ["beekeeping"], ["woodworking"], "correct"),
    ("You are a rock climber.", ["rock climbing"], ["pottery"], "correct"),
    ("I'm a climber.", ["rock climbing"], [], "correct"),
    ("Runners like you keep at it.", ["running"], [], "correct"),
    ("I'm a painter and a hiker.", ["hiking"], ["painting"], "ambiguous"),
    ("You used to be a knitter.", ["knitting"], [], "wrong"),
    ("You are no longer a woodworker.", ["woodworking"], [], "wrong"),
    ("I'm a woodworker.", ["beekeeping"], ["woodworking"], "stale"),
    # controls: only lower-case values headed by an -ing word are activities
    ("You are a manager.", ["managing director"], [], "wrong"),
    ("You are an engineer.", ["engineering manager"], [], "wrong"),
    ("You are a teacher.", ["teaching assistant"], [], "wrong"),
    ("The builder is here.", ["Empire State Building"], [], "wrong"),
    ("I'm a singer.", ["sing"], [], "wrong"),
]


@pytest.mark.parametrize(("answer", "gold", "stale", "verdict"), AGENT_NOUN_CASES)
def test_a_doer_names_the_activity(answer: str, gold: list[str], stale: list[str], verdict: str) -> None:
    assert score_answer(answer, gold, stale, question=HOBBY_QUESTION).verdict == verdict


def test_a_generic_word_for_the_asked_kind_is_no_second_hobby() -> None:
    """ "a hobbyist" is built on the question's "hobby": it names the slot, not a rival value."""
    question = "Which hobby have I been spending my free time on lately?"
    assert (
        score_answer("I'm a beekeeper and a hobbyist.", ["beekeeping"], [], question=question).verdict
        == "correct"
    )
    assert (
        score_answer("I'm a beekeeper and a baker.", ["beekeeping"], [], question=question).verdict == "wrong"
    )


def test_notes_that_name_the_doer_hold_the_activity() -> None:
    assert conveys_value("user: a keen knitter", "knitting")
    assert not conveys_value("user: a keen knitter", "Knitting Factory")


@given(
    st.sampled_from(
        ["knitting", "climbing", "beekeeping", "running", "hiking", "dancing", "skiing", "surfing"]
    ),
    st.sampled_from(["I'm a {doer}.", "You are a {doer} these days.", "Keen {doer}s like you."]),
)
def test_every_doer_of_an_activity_names_it(activity: str, template: str) -> None:
    doers = {form for form in agent_nouns(activity) if form.endswith("er")}
    assert len(doers) == 1
    answer = template.format(doer=doers.pop())
    assert score_answer(answer, [activity], ["pottery"]).verdict == "correct"


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12))
def test_only_ing_words_have_doers(word: str) -> None:
    assert bool(agent_nouns(word)) == (word.endswith("ing") and len(word) >= 6)


# (answer, gold, stale, question, verdict)
ATTRIBUTION_CASES = [
    # the value given to another person by name
    ("Kenji is currently dating Sofia.", ["Kenji"], ["Sofia"], "Who am I dating right now?", "wrong"),
    ("Kenji is dating Sofia.", ["Sofia"], [], "Who am I dating?", "wrong"),
    ("Elena is Isaac's current partner.", ["Isaac"], ["Elena"], "Who is my current partner?", "wrong"),
    ("Atlassian is Kenji's employer.", ["Atlassian"], [], "Who is my current employer?", "wrong"),
    (
        "The phone carrier Rafael uses is US Mobile.",
        ["Xfinity Mobile"],
        ["US Mobile"],
        "What phone carrier do I use?",
        "wrong",
    ),
    (
        "The phone carrier Rafael uses is Xfinity Mobile.",
        ["Xfinity Mobile"],
        [],
        "What phone carrier do I use?",
        "wrong",
    ),
    ("The employer of Kenji is Atlassian.", ["Atlassian"], [], "Who is my current employer?", "wrong"),
    ("Kenji's 27:41 record is the best.", ["27:01"], ["27:41"], "What's my personal best 5K time?", "wrong"),
    # ... or by a role noun
    (
        "The current employer of the violin teacher is Atlassian.",
        ["Atlassian"],
        [],
        "Who is my current employer?",
        "wrong",
    ),
    (
        "The trainer is a member of the CorePower Yoga gym.",
        ["CorePower Yoga"],
        [],
        "What gym am I a member of?",
        "wrong",
    ),
    (
        "Atlassian is the employer of the violin teacher.",
        ["Atlassian"],
        [],
        "Who is my current employer?",
        "wrong",
    ),
    # controls: the user's own value, or the asked thing named, keeps its verdict
    ("You live in Denver.", ["Denver"], [], "Where do I live?", "correct"),
    ("Your partner is Sofia.", ["Sofia"], ["Kenji"], "Who am I dating?", "correct"),
    ("The partner is Sofia.", ["Sofia"], ["Kenji"], "Who am I dating?", "correct"),
    ("Sofia.", ["Sofia"], ["Kenji"], "Who am I dating?", "correct"),
    ("You are dating Sofia.", ["Sofia"], ["Kenji"], "Who am I dating?", "correct"),
    ("Sofia is your partner, not Kenji.", ["Sofia"], ["Kenji"], "Who am I dating?", "correct"),
    ("My manager is Kenji.", ["Kenji"], [], "Who is my manager?", "correct"),
    ("The manager is Kenji.", ["Kenji"], [], "Who is my manager?", "correct"),
    (
        "Your current employer is Atlassian.",
        ["Atlassian"],
        ["Spotify"],
        "Who is my current employer?",
        "correct",
    ),
    (
        "The current employer is Atlassian.",
        ["Atlassian"],
        ["Spotify"],
        "Who is my current employer?",
        "correct",
    ),
    ("The grocery budget is $675.", ["$675"], ["$600"], "What's my monthly grocery budget?", "correct"),
    ("Isaac is the current partner.", ["Isaac"], ["Elena"], "Who is my current partner?", "correct"),
    (
        "Monday is the new day instead of Thursday.",
        ["Monday"],
        ["Thursday"],
        "What day is my pottery class?",
        "correct",
    ),
    ("Kenji is the one now, and Sofia was before.", ["Kenji"], ["Sofia"], "Who am I dating?", "correct"),
    ("The partner's name is Kenji.", ["Kenji"], ["Sofia"], "Who am I dating?", "correct"),
    (
        "The old teacher title is now data analyst.",
        ["data analyst"],
        ["teacher"],
        "What's my job title?",
        "correct",
    ),
    ("Elena's current partner is Isaac.", ["Isaac"], ["Elena"], "Who is my current partner?", "wrong"),
    ("The doctor's current city is Columbus.", ["Columbus"], ["Nashville"], "Where do I live?", "wrong"),
    # a value set equal to another tells of a change: both stay asserted (no credit either way)
    ("QA engineer is now a content strategist.", ["content strategist"], ["QA engineer"], "", "ambiguous"),
    ("Sofia is the person you're seeing.", ["Sofia"], ["Kenji"], "Who am I dating?", "correct"),
    ("Everything is pointing to Denver.", ["Denver"], [], "Where do I live?", "correct"),
    ("Practice is on Mondays.", ["Monday"], ["Thursday"], "What day is my pottery class?", "correct"),
    ("Atlassian is one of the Sydney firms.", ["Atlassian"], [], "Who is my current employer?", "correct"),
    ("Denver is the capital of Colorado.", ["Denver"], [], "Where do I live?", "correct"),
    (
        "Blink Fitness is a member of the personal trainer group.",
        ["Blink Fitness"],
        [],
        GYM_QUESTION,
        "correct",
    ),
    (
        "The carrier you use is Xfinity Mobile.",
        ["Xfinity Mobile"],
        [],
        "What phone carrier do I use?",
        "correct",
    ),
]


@pytest.mark.parametrize(("answer", "gold", "stale", "question", "verdict"), ATTRIBUTION_CASES)
def test_a_value_given_to_another_is_not_the_users(answer, gold, stale, question, verdict) -> None:
    assert score_answer(answer, gold, stale, question=question).verdict == verdict


PEOPLE = ["Kenji", "Rafael", "Priya", "Tomas", "Leila"]
ROLES = ["trainer", "violin teacher", "neighbor", "coworker", "sister"]
GYMS = ["CorePower Yoga", "Blink Fitness", "Anytime Fitness"]


@given(st.sampled_from(PEOPLE + [f"the {role}" for role in ROLES]), st.sampled_from(GYMS))
def test_another_persons_gym_is_no_answer(owner: str, gym: str) -> None:
    """Said of a named person or a role noun, the gym is theirs; said of "you", or of the gym, the
    user's. (A bare name opening the sentence, "Kenji is a member of ...", is left alone: a capital
    there does not tell a name from any first word, "Practice is on Mondays".)"""
    for answer in (
        f"The gym {owner} goes to is {gym}.",
        f"The gym of {owner} is {gym}.",
        f"{gym} is the gym of {owner}.",
    ):
        assert score_answer(answer, [gym], [], question=GYM_QUESTION).verdict == "wrong", answer
    if owner.startswith("the "):
        answer = f"The {owner[4:]} is a member of {gym}."
        assert score_answer(answer, [gym], [], question=GYM_QUESTION).verdict == "wrong", answer
    assert score_answer(f"You are a member of {gym}.", [gym], [], question=GYM_QUESTION).verdict == "correct"
    assert score_answer(f"The gym is {gym}.", [gym], [], question=GYM_QUESTION).verdict == "correct"


@given(
    st.lists(st.sampled_from(PEOPLE), min_size=3, max_size=3, unique=True),
    st.sampled_from(["dating", "seeing"]),
)
def test_two_people_dating_each_other_is_no_answer(people: list[str], verb: str) -> None:
    """ "X is dating Y" gives Y to X, whether X, Y or neither is the gold; "you are dating Y" does not."""
    first, second, third = people
    question = "Who am I dating right now?"
    for gold, stale in ((first, [second]), (second, [first]), (second, [third])):
        assert (
            score_answer(f"{first} is {verb} {second}.", [gold], stale, question=question).verdict == "wrong"
        )
    assert (
        score_answer(f"You are {verb} {second}.", [second], [first], question=question).verdict == "correct"
    )
