"""Writing the chat text: values as people say them, evidence sessions and distractor sessions.

An evidence session carries one `Event` of the timeline inside ordinary requests (the fact's own
topic mixed with an unrelated one); a distractor session is a chat on a `DistractorTopic` whose
slots never hold the tracked domain's values. The short replies below (acknowledgements,
corrections, closers) are tied to how sessions are assembled, so they stay next to that code.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from supersede_lib.agent.episode import Turn
from supersede_lib.data.synthetic.config import GeneratorConfig
from supersede_lib.data.synthetic.distractors import (
    CROSS_DOMAIN_SLOTS,
    DISTRACTOR_TOPICS,
    SLOT_VALUES,
    DistractorTopic,
)
from supersede_lib.data.synthetic.domains import FACT_DOMAINS, FactDomain
from supersede_lib.data.synthetic.timeline import Event

_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
).split()
_ACKS_INTRO = ("Good to know: {value}.", "Thanks for the context, {value} noted.", "Got it, {value}.")
_ACKS_UPDATE = (
    "Thanks for the update: {value}.",
    "Noted, {value} from here on.",
    "Got it, {value} going forward.",
)
_ACKS_IMPLICIT = (
    "That sounds like a lot going on!",
    "Sounds like a busy stretch.",
    "Thanks for sharing that.",
    "Good to hear how things are going.",
    "",
)
_RETRACTIONS = (
    "Actually no, sorry, I got that wrong earlier: it's {value}, not {wrong}.",
    "Wait, correction to what I said before: {value}, not {wrong}. I mixed them up.",
    "Scratch what I said about {wrong}. It's actually {value}.",
    "Hmm, I misspoke a minute ago. Not {wrong} but {value}.",
)
_RETRACTION_ACKS = (
    "No problem, thanks for clarifying: {value}, not {wrong}.",
    "Thanks for the correction. I'll go with {value}.",
    "Got it, {value} then.",
)
_CLOSERS = (
    ("Thanks, that's really helpful.", "You're welcome! Come back any time with follow-up questions."),
    ("Perfect, I'll try that.", "Great, let me know how it goes."),
    ("Thanks!", "Happy to help."),
    ("That makes sense, thank you.", "Glad it helped. Good luck!"),
)
_DETAIL_PROMPTS = (
    "Can you go into a bit more detail?",
    "What else should I keep in mind?",
    "Could you expand on that a little?",
    "Anything else worth knowing?",
    "That's useful. Can you give me a few more pointers?",
)


# --------------------------------------------------------------------------------------------
# Surface forms
# --------------------------------------------------------------------------------------------


def _number_word(number: int) -> str:
    return _NUMBER_WORDS[number] if 0 <= number < len(_NUMBER_WORDS) else str(number)


def _money(dollars: int) -> str:
    return f"${dollars:,}"


def _race_time(seconds: int) -> str:
    return f"{seconds // 60}:{seconds % 60:02d}"


def _duration_words(seconds: int) -> str:
    minutes, rest = divmod(seconds, 60)
    parts = []
    if minutes:
        parts.append(f"{minutes} minute" + ("s" if minutes != 1 else ""))
    if rest:
        parts.append(f"{rest} second" + ("s" if rest != 1 else ""))
    return " and ".join(parts)


def canonical(domain: FactDomain, value: Any) -> str:
    """The value as gold_text writes it."""
    if domain.value_kind == "money":
        return _money(value)
    if domain.value_kind == "race_time":
        return _race_time(value)
    return str(value)


def variants(domain: FactDomain, value: Any) -> tuple[str, ...]:
    """Accepted spellings of one value: '4'/'four', '$350,000'/'350,000', '23:10'/'23 minutes 10 seconds'."""
    if domain.value_kind == "count":
        return (str(value), _number_word(value))
    if domain.value_kind == "money":
        forms = [_money(value), f"{value:,}", str(value)]
        if value >= 10_000 and value % 1_000 == 0:
            forms.append(f"${value // 1_000}k")
        return tuple(dict.fromkeys(forms))
    if domain.value_kind == "race_time":
        minutes, seconds = divmod(value, 60)
        if seconds == 0:
            return (_race_time(value), f"{minutes} minutes")
        return (
            _race_time(value),
            f"{minutes} minutes {seconds} seconds",
            f"{minutes} minutes and {seconds} seconds",
        )
    if domain.name == "schedule":
        return (value, f"{value}s")
    return (value,)


def _with_article(phrase: str) -> str:
    vowel_sound = phrase[:1].lower() in "aeio" or phrase.startswith("HR")
    return f"{'an' if vowel_sound else 'a'} {phrase}"


def _say(rng: random.Random, domain: FactDomain, value: Any) -> str:
    """The value as a user would write it in a sentence (counts: digits or words)."""
    if domain.value_kind == "count":
        return rng.choice((str(value), _number_word(value)))
    return canonical(domain, value)


def _increment(subject: dict[str, Any], delta: int) -> str:
    if delta == 1:
        return f"another {subject['single']}"
    return f"{_number_word(delta)} more {subject['more_noun']}"


def fill(template: str, slots: dict[str, Any]) -> str:
    """A template with its slots filled, capitalised."""
    text = template.format(**slots)
    return text[:1].upper() + text[1:]


# --------------------------------------------------------------------------------------------
# Session rendering
# --------------------------------------------------------------------------------------------


@dataclass
class Exchange:
    """One user message and the assistant's reply; has_answer marks a turn that says the fact."""

    user: str
    assistant: str
    user_has_answer: bool = False
    assistant_has_answer: bool = False


@dataclass
class EventRendering:
    """How one event was said, for the episode metadata."""

    stated: bool  # the held value is written out (not only a relative change)
    user_sentence: str  # the user's sentence that carries the change


def _statement_slots(
    rng: random.Random, domain: FactDomain, subject: dict[str, Any], value: Any, old: Any
) -> dict[str, Any]:
    slots = {key: item for key, item in subject.items() if isinstance(item, str)}
    said = _say(rng, domain, value)
    slots.update(value=said, a_value=_with_article(said), wrong="")
    slots["old"] = canonical(domain, old) if old is not None else ""
    if domain.value_kind == "count":
        slots["value_word"] = _number_word(value)
        slots["increment"] = _increment(subject, value - old if old is not None else 1)
    if old is not None and domain.value_kind == "money":
        slots["delta"] = _money(abs(value - old))
    if old is not None and domain.value_kind == "race_time":
        slots["delta"] = _duration_words(abs(value - old))
    return slots


def _statement_templates(domain: FactDomain, event: Event, going_up: bool) -> tuple[str, ...]:
    """Templates for the user's sentence; a retraction first states its wrong value like an update."""
    explicit = event.style == "explicit"
    if event.kind == "introduce":
        return domain.intro_explicit if explicit else domain.intro_implicit
    if event.relative:
        return domain.relative_up if going_up else domain.relative_down
    return domain.update_explicit if explicit else domain.update_implicit


def _ack(
    rng: random.Random, domain: FactDomain, kind: str, style: str, slots: dict[str, Any]
) -> tuple[str, bool]:
    """The assistant's acknowledgement and whether it restates the value (explicit only)."""
    if style == "implicit":
        return fill(rng.choice(_ACKS_IMPLICIT), slots) if rng.random() < 0.6 else "", False
    pool = _ACKS_INTRO if kind == "introduce" else _ACKS_UPDATE + domain.acks
    return fill(rng.choice(pool), slots), True


def _join(first: str, second: str) -> str:
    return " ".join(part for part in (first, second) if part)


def _evidence_requests(
    rng: random.Random,
    domain: FactDomain,
    slots: dict[str, Any],
    count: int,
    fact_at: int,
    fact_in_passing: bool,
) -> list[tuple[str, str]]:
    """Requests for an evidence session: the fact's own topic mixed with an unrelated one.

    Mixing keeps evidence sessions from standing out by subject alone; a fact said in passing
    may ride on the unrelated request ("I'm still unpacking in Austin. Any tips on jet lag?").
    """
    own = [
        (fill(user, slots), fill(reply, slots))
        for user, reply in rng.sample(domain.requests, len(domain.requests))
    ]
    topic = rng.choice(DISTRACTOR_TOPICS)
    topic_slots = distractor_slots(rng, domain.name)
    other = [
        (fill(user, topic_slots), fill(reply, topic_slots))
        for user, reply in rng.sample(topic.exchanges, len(topic.exchanges))
    ]
    chosen = []
    for position in range(count):
        own_first = (position == fact_at and not fact_in_passing) or rng.random() < 0.5
        first, second = (own, other) if own_first else (other, own)
        source = first or second
        chosen.append(source.pop(0) if source else rng.choice(_CLOSERS))
    return chosen


def event_exchanges(
    rng: random.Random,
    config: GeneratorConfig,
    domain: FactDomain,
    subject: dict[str, Any],
    event: Event,
    old: Any,
) -> tuple[list[Exchange], EventRendering]:
    """The exchanges of a session in which the tracked fact is introduced, updated or corrected."""
    n_exchanges = rng.randint(*config.evidence_exchanges)
    retracting = event.kind == "retract"
    if retracting:
        n_exchanges = max(n_exchanges, 2)
    stated_value = event.retracted_value if retracting else event.value
    slots = _statement_slots(rng, domain, subject, stated_value, old)
    going_up = old is not None and stated_value > old
    template = rng.choice(_statement_templates(domain, event, going_up))
    sentence = fill(template, slots)
    stated = "{value" in template or "{a_value}" in template
    if event.style == "explicit" and rng.random() < 0.6:
        fact_at = 0
    else:
        fact_at = rng.randrange(n_exchanges - (1 if retracting else 0))
    in_passing = event.style == "implicit" and rng.random() < 0.5
    requests = _evidence_requests(rng, domain, slots, n_exchanges, fact_at, in_passing)
    exchanges = [Exchange(user, reply) for user, reply in requests]

    fact = exchanges[fact_at]
    if event.style == "implicit" and rng.random() < 0.4:
        fact.user = _join(fact.user, sentence)
    else:
        fact.user = _join(sentence, fact.user)
    fact.user_has_answer = True
    ack, ack_states_value = _ack(rng, domain, event.kind, event.style, slots)
    fact.assistant = _join(ack, fact.assistant)
    fact.assistant_has_answer = ack_states_value
    rendering = EventRendering(stated=stated and not retracting, user_sentence=sentence)

    if retracting:
        correction_at = rng.randrange(fact_at + 1, n_exchanges)
        correction_slots = _statement_slots(rng, domain, subject, event.value, old)
        correction_slots["wrong"] = canonical(domain, event.retracted_value)
        correction = fill(rng.choice(_RETRACTIONS + domain.retractions), correction_slots)
        target = exchanges[correction_at]
        target.user = _join(correction, target.user)
        target.user_has_answer = True
        target.assistant = _join(fill(rng.choice(_RETRACTION_ACKS), correction_slots), target.assistant)
        target.assistant_has_answer = True
        rendering = EventRendering(stated=True, user_sentence=correction)
    return exchanges, rendering


def distractor_slots(rng: random.Random, tracked_domain: str | None) -> dict[str, str]:
    """Fill-ins for distractor templates; other domains' values are fair game, the tracked one is not."""
    slots = {slot: rng.choice(values) for slot, values in SLOT_VALUES.items()}
    for slot, (domain_name, neutral) in CROSS_DOMAIN_SLOTS.items():
        pool = neutral if domain_name == tracked_domain else FACT_DOMAINS[domain_name].values
        if slot == "friend" and rng.random() < 0.7:  # friends are mostly not named like partners
            pool = neutral  # the friend slot's neutral values are friends' names
        slots[slot] = rng.choice(pool)
    return slots


def _details_answer(rng: random.Random, details: Sequence[str], n_sentences: int) -> str:
    start = rng.randrange(len(details))
    picked = [details[(start + offset) % len(details)] for offset in range(n_sentences)]
    rng.shuffle(picked)
    return " ".join(picked)


def distractor_exchanges(
    rng: random.Random,
    topic: DistractorTopic,
    n_exchanges: int,
    filler_chars: int,
    slots: dict[str, str],
) -> list[Exchange]:
    """A distractor session on `topic`, padded with more advice up to `filler_chars` characters."""
    chosen = rng.sample(topic.exchanges, min(n_exchanges, len(topic.exchanges)))
    exchanges = [Exchange(fill(user, slots), fill(reply, slots)) for user, reply in chosen]
    while len(exchanges) < n_exchanges:
        exchanges.append(
            Exchange(rng.choice(_DETAIL_PROMPTS), _details_answer(rng, topic.details, rng.randint(2, 3)))
        )
    total = sum(len(exchange.user) + len(exchange.assistant) for exchange in exchanges)
    while total < filler_chars:
        filler = Exchange(
            rng.choice(_DETAIL_PROMPTS), _details_answer(rng, topic.details, len(topic.details))
        )
        exchanges.append(filler)
        total += len(filler.user) + len(filler.assistant)
    if rng.random() < 0.3:
        exchanges.append(Exchange(*rng.choice(_CLOSERS)))
    return exchanges


def to_turns(exchanges: Sequence[Exchange]) -> tuple[Turn, ...]:
    """Exchanges as the session's alternating user/assistant turns."""
    turns: list[Turn] = []
    for exchange in exchanges:
        turns.append(Turn("user", exchange.user, exchange.user_has_answer))
        turns.append(Turn("assistant", exchange.assistant, exchange.assistant_has_answer))
    return tuple(turns)


def pick_topics(rng: random.Random, count: int) -> list[DistractorTopic]:
    """Distractor topics with no topic twice in a row."""
    topics: list[DistractorTopic] = []
    for _ in range(count):
        options = [topic for topic in DISTRACTOR_TOPICS if not topics or topic is not topics[-1]]
        topics.append(rng.choice(options))
    return topics
