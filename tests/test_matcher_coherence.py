"""Three kinds of answer that name the gold without answering with it (matcher v8), on examples
written for these rules (none from a test set or a recorded trajectory), each beside controls that
must keep their verdict.

1. The gold named only to say it never came up.
2. An answer that asserts the gold and denies or retracts it.
3. A garble that makes the gold the value of a thing the same value owns.
"""

import pytest

from supersede_lib.eval.matcher import score_answer

GYM = (["Planet Fitness"], ["Gold's Gym"], "Which gym do I go to now?")
PARTNER = (["Ingrid"], ["Marta"], "What is my girlfriend's name these days?")
BUDGET = (["$925", "925"], ["$1,100", "1,100"], "How much is my monthly grocery budget now?")

NEVER_CAME_UP = [
    (GYM, "I don't recall you mentioning Planet Fitness.", "wrong"),
    (GYM, "You didn't tell me anything about Planet Fitness.", "wrong"),
    (GYM, "There is no record of Planet Fitness in our chats.", "wrong"),
    (GYM, "I have no information about you joining Planet Fitness.", "wrong"),
    (GYM, "Planet Fitness never came up in our conversations.", "wrong"),
    (GYM, "I'm not aware of you going to Planet Fitness.", "wrong"),
    (GYM, "Planet Fitness is unrelated to your question.", "wrong"),
    (GYM, "Planet Fitness has nothing to do with what you asked.", "wrong"),
    # controls
    (GYM, "Yes, you switched to Planet Fitness.", "correct"),
    (GYM, "You mentioned Planet Fitness.", "correct"),
    (GYM, "You go to Planet Fitness now. I don't recall the exact day you switched.", "correct"),
    (GYM, "I don't remember the day you switched to Planet Fitness, but that is your gym.", "correct"),
    (GYM, "Planet Fitness. You never mentioned going back to Gold's Gym.", "correct"),
]

CONTRADICTED = [
    (GYM, "Your gym is Planet Fitness. Actually, you don't go to Planet Fitness.", "wrong"),
    (GYM, "Planet Fitness. Scratch that.", "wrong"),
    (GYM, "It's Planet Fitness. No, that is not right.", "wrong"),
    (BUDGET, "Your budget is $925. It is not $925.", "wrong"),
    (GYM, "You go to Planet Fitness, and Gold's Gym is still your gym too.", "ambiguous"),
    (GYM, "Both Planet Fitness and Gold's Gym are your current gyms.", "ambiguous"),
    (GYM, "Planet Fitness. Wait, no, you go to Gold's Gym.", "stale"),  # retracted for the old value
    # controls
    (GYM, "Planet Fitness (you left Gold's Gym)", "correct"),
    (GYM, "You go to Planet Fitness, not Gold's Gym.", "correct"),
    (GYM, "Not Gold's Gym anymore, it's Planet Fitness.", "correct"),
    (GYM, "Not Gold's Gym. Scratch that, you go to Planet Fitness.", "correct"),
    (BUDGET, "$925, so you shouldn't spend more than $925 a month.", "correct"),
    (BUDGET, "It is $925, not $1,100.", "correct"),
]

GARBLED = [
    (PARTNER, "Ingrid's girlfriend is Ingrid.", "wrong"),
    (PARTNER, "Ingrid's partner's name is Ingrid.", "wrong"),
    (GYM, "Planet Fitness's gym is Planet Fitness.", "wrong"),
    # controls
    (PARTNER, "Ingrid's your girlfriend now.", "correct"),
    (PARTNER, "Your girlfriend is Ingrid, and Ingrid's birthday is in May.", "correct"),
    (PARTNER, "Ingrid is your girlfriend.", "correct"),
    (PARTNER, "Your girlfriend's name is Ingrid.", "correct"),
]


@pytest.mark.parametrize(("episode", "answer", "verdict"), NEVER_CAME_UP + CONTRADICTED + GARBLED)
def test_gold_named_without_answering_with_it(episode, answer, verdict) -> None:
    gold, stale, question = episode
    score = score_answer(answer, gold, stale, question=question)
    assert score.verdict == verdict, (answer, score)


def test_each_kind_says_why_credit_was_withheld() -> None:
    gold, stale, question = GYM
    assert (
        score_answer("Planet Fitness. Scratch that.", gold, stale, question=question).reason == "contradicted"
    )
    gold, stale, question = PARTNER
    assert score_answer("Ingrid's girlfriend is Ingrid.", gold, stale, question=question).reason == "garbled"
