"""Matcher v6: a value said of a thing that only other turns of the sessions talk about is not the user's."""

import dataclasses
from pathlib import Path

import pytest

from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.data.longmemeval import episodes_from_records, read_longmemeval_records
from supersede_lib.eval.matcher import (
    analyse,
    content_stems,
    other_turn_topics,
    score_answer,
    score_episode_answer,
)
from supersede_lib.eval.matcher.sessions import said_of_another_topic


def _episode(
    evidence: list[str],
    elsewhere: list[str],
    question: str = "What gym am I a member of?",
    gold: tuple[str, ...] = ("Crunch Fitness",),
    stale: tuple[str, ...] = ("Blink Fitness",),
    flagged: bool = True,
) -> Episode:
    turns = [Turn("user", text, True if flagged else None) for text in evidence]
    turns += [Turn("user", text, False if flagged else None) for text in elsewhere]
    return Episode(
        episode_id="e",
        sessions=(Session("s0", "2023/05/01 (Mon) 10:00", tuple(turns)),),
        question=question,
        question_date="2023/06/01 (Thu) 10:00",
        gold_answers=gold,
        superseded_values=stale,
        source="synthetic:easy",
    )


GYM = _episode(
    ["I work out at Blink Fitness.", "I cancelled my old membership, so my gym is now Crunch Fitness."],
    [
        "My cousin has an interview at Intuit next week.",
        "My laptop has become really slow.",
        "How often should a young pet see the vet?",
        "Any tips for a class at the community centre?",
    ],
)


def _owned_by_another(answer: str, value: str, episode: Episode = GYM) -> bool:
    text = analyse(answer)
    words = analyse(value).words
    start = next(i for i in range(len(text.words)) if text.words[i : i + len(words)] == words)
    question_stems = frozenset(content_stems(analyse(episode.question).words))
    return said_of_another_topic(text, start, start + len(words), other_turn_topics(episode), question_stems)


def test_other_turn_topics_are_words_only_turns_without_evidence_use() -> None:
    topics = other_turn_topics(GYM)
    assert {"cousin", "laptop", "interview"} <= topics
    assert "gym" not in topics and "crunch" not in topics  # the question's and the values' words
    assert "membership" not in topics  # an evidence turn's word
    assert "pet" not in topics  # a word naming the kind of a personal fact (KIND_WORDS)


def test_without_evidence_flags_no_turn_is_another_topic() -> None:
    unflagged = _episode(["my gym is now Crunch Fitness"], ["My cousin has an interview."], flagged=False)
    assert other_turn_topics(unflagged) == frozenset()


@pytest.mark.parametrize(
    ("answer", "value", "another"),
    [
        ("cousin: Crunch Fitness", "Crunch Fitness", True),  # a notes key from another turn
        ("My laptop is with Crunch Fitness.", "Crunch Fitness", True),  # the subject it is said of
        ("The cousin's gym is Crunch Fitness.", "Crunch Fitness", True),  # a possessor in its clause
        ("gym: Crunch Fitness", "Crunch Fitness", False),  # the asked thing's own key
        ("membership: Crunch Fitness", "Crunch Fitness", False),  # a word of the evidence turns
        ("Pet: Crunch Fitness", "Crunch Fitness", False),  # a kind word labels, whatever the sessions
        ("cousin gym: Crunch Fitness", "Crunch Fitness", False),  # one word of the asked topic keeps it
        ("cousin: my gym is Crunch Fitness", "Crunch Fitness", False),  # the line's own text names it
        ("Crunch Fitness", "Crunch Fitness", False),  # no owner
    ],
)
def test_the_owner_of_a_value(answer: str, value: str, another: bool) -> None:
    assert _owned_by_another(answer, value) is another


def test_a_value_given_to_another_topic_earns_nothing_live_but_did_without_the_sessions() -> None:
    answer = "cousin: Crunch Fitness"
    assert score_episode_answer(GYM, answer).verdict == "wrong"
    assert (
        score_answer(answer, GYM.gold_answers, GYM.superseded_values, question=GYM.question).verdict
        == "correct"
    )


def test_an_old_value_given_to_another_topic_is_no_stale_assertion() -> None:
    assert score_episode_answer(GYM, "cousin: Blink Fitness\ngym: Crunch Fitness").verdict == "correct"
    assert score_episode_answer(GYM, "cousin: Crunch Fitness\ngym: Blink Fitness").verdict == "stale"


def test_plain_answers_grade_as_before() -> None:
    for answer, verdict in [
        ("Crunch Fitness", "correct"),
        ("You go to Crunch Fitness now.", "correct"),
        ("Blink Fitness", "stale"),
        ("Blink Fitness or Crunch Fitness", "ambiguous"),
    ]:
        assert score_episode_answer(GYM, answer).verdict == verdict, answer


def test_longmemeval_flags_only_answer_turns_so_its_evidence_sessions_are_the_asked_topic() -> None:
    """LongMemEval marks the turns that hold the answer, not the exchange: the rest of an evidence
    session talks about the same thing, so only sessions without evidence name other topics."""
    other_session = Session(
        "s1", "2023/05/02 (Tue) 10:00", (Turn("user", "My neighbour bought a kayak.", False),)
    )
    real = dataclasses.replace(GYM, source="longmemeval:oracle", sessions=(*GYM.sessions, other_session))
    topics = other_turn_topics(real)
    assert "laptop" not in topics  # an unflagged turn of the evidence session
    assert {"neighbour", "kayak"} <= topics  # a session without evidence
    assert score_episode_answer(real, "laptop: Crunch Fitness").verdict == "correct"
    assert score_episode_answer(real, "kayak: Crunch Fitness").verdict == "wrong"


REAL_SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "longmemeval-samples"


@pytest.mark.skipif(
    not REAL_SAMPLES.exists(), reason="the workplace's LongMemEval samples are not beside the repo"
)
def test_on_real_longmemeval_records_the_sessions_withdraw_no_plain_answer() -> None:
    for path in sorted(REAL_SAMPLES.glob("*_ku_real*.json")):
        split = "s" if "_s_" in path.name else "oracle"
        for episode in episodes_from_records(read_longmemeval_records(path), path.name, split):
            gold = episode.gold_answers[0]
            for answer in (gold, f"The answer is {gold}.", f"It was {gold}, as you told me."):
                live = score_episode_answer(episode, answer).verdict
                alone = score_answer(
                    answer, episode.gold_answers, episode.superseded_values, question=episode.question
                )
                assert live == alone.verdict == "correct", (path.name, answer)
