"""Procedural supersession timelines: deterministic by seed, no model calls.

Each episode is a multi-session chat in which one fact about the user (where they live,
their car, how many Korean restaurants they have tried, ...) is introduced, later
superseded one or more times, and buried among distractor sessions on other topics. The
question asks for the current value (or, optionally, an earlier one), and every episode
records the stale values so the stale-answer penalty of the reward can be computed.

Difficulty is a ladder of `GeneratorConfig` presets (`DIFFICULTY_LADDER`), from clean
explicit "X is now Y" updates to long histories with implicit, relative and retracted
updates. The `explicit_templated` preset is the paper's saturated control (Section 4).

All randomness flows through one `random.Random(seed)`, so an episode is a pure function of
(seed, config); the template text lives in this module so the generator stays one file.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any

from supersede_lib.episode import Episode, Session, Turn

UPDATE_STYLES = ("explicit", "implicit", "mixed")
DIFFICULTY_LADDER = ("easy", "medium", "hard", "expert")
EXPLICIT_TEMPLATED = "explicit_templated"
# Phrases that make an update explicit ("X is now Y"). Every explicit update template holds one;
# no implicit template, acknowledgement, retraction or distractor may hold any of them.
EXPLICIT_MARKERS = ("is now", "are now", "has changed to", "changed to")
MAX_UPDATES = 6  # the smallest value pool (days of the week) holds 7 values
EPISODE_SEED_STRIDE = 1_000_000  # generate_episodes: episode i of base seed s uses s * stride + i

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
).split()


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------

IntRange = tuple[int, int]


@dataclass(frozen=True)
class GeneratorConfig:
    """Knobs of the generator. Ranges are inclusive (min, max); a single int means (n, n)."""

    name: str = "custom"  # used in episode_id and source: f"syn-{name}-{seed}", f"synthetic:{name}"
    n_sessions: IntRange = (6, 8)  # all sessions: introduction + updates + distractors
    n_updates: IntRange = (1, 2)  # how many times the introduced value is superseded
    update_style: str = "mixed"  # explicit ("X is now Y") | implicit (in passing, paraphrase) | mixed
    evidence_exchanges: IntRange = (2, 3)  # user/assistant exchanges in a session that mentions the fact
    distractor_exchanges: IntRange = (2, 3)  # user/assistant exchanges per distractor session
    filler_chars: int = 0  # pad each distractor session with on-topic chat up to this many characters
    trailing_distractors: IntRange = (1, 2)  # distractor sessions after the last update
    retraction_prob: float = 0.0  # per update: a wrong value is stated, then corrected in the same session
    relative_wording_prob: float = 0.0  # per implicit numeric update: "another one", "up by $20,000"
    previous_value_prob: float = 0.0  # the question asks for an earlier value instead of the current one
    counts_weight: float = 1.0  # sampling weight of the growing-count domain (every other domain: 1.0)
    domains: tuple[str, ...] = ()  # fact domains to draw from; empty = all of FACT_DOMAINS
    days_between_sessions: IntRange = (1, 14)

    def __post_init__(self) -> None:
        for name in (
            "n_sessions",
            "n_updates",
            "evidence_exchanges",
            "distractor_exchanges",
            "trailing_distractors",
            "days_between_sessions",
        ):
            object.__setattr__(self, name, _as_range(name, getattr(self, name)))
        object.__setattr__(self, "domains", tuple(self.domains))
        self._validate()

    def _validate(self) -> None:
        if self.update_style not in UPDATE_STYLES:
            raise ValueError(
                f"GeneratorConfig.update_style: expected one of {UPDATE_STYLES}, got {self.update_style!r}"
            )
        for name in ("retraction_prob", "relative_wording_prob", "previous_value_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"GeneratorConfig.{name}: expected a probability in [0, 1], got {value!r}")
        if self.counts_weight < 0:
            raise ValueError(f"GeneratorConfig.counts_weight: must be >= 0, got {self.counts_weight!r}")
        if self.filler_chars < 0:
            raise ValueError(f"GeneratorConfig.filler_chars: must be >= 0, got {self.filler_chars!r}")
        if self.n_updates[1] > MAX_UPDATES:
            raise ValueError(
                f"GeneratorConfig.n_updates: at most {MAX_UPDATES} updates, got {self.n_updates}"
            )
        if self.n_sessions[0] < 1 + self.n_updates[1]:
            raise ValueError(
                f"GeneratorConfig.n_sessions: the minimum {self.n_sessions[0]} cannot hold the introduction "
                f"plus {self.n_updates[1]} updates (n_updates max)"
            )
        if self.evidence_exchanges[0] < 1 or self.distractor_exchanges[0] < 1:
            raise ValueError(
                "GeneratorConfig.evidence_exchanges/distractor_exchanges: need at least 1 exchange"
            )
        if self.days_between_sessions[0] < 1:
            raise ValueError("GeneratorConfig.days_between_sessions: sessions must be at least 1 day apart")
        unknown = [name for name in self.domains if name not in FACT_DOMAINS]
        if unknown:
            raise ValueError(f"GeneratorConfig.domains: unknown {unknown}; known: {sorted(FACT_DOMAINS)}")
        if self.domains and all(name == "counts" for name in self.domains) and self.counts_weight == 0:
            raise ValueError("GeneratorConfig.counts_weight: 0 leaves no domain to draw from")


def _pool(names: str) -> tuple[str, ...]:
    """A value pool written as one comma-separated string (keeps long pools readable)."""
    return tuple(name.strip() for name in names.split(","))


def _as_range(name: str, value: Any) -> IntRange:
    """Accept 7, (6, 8) or [6, 8] (YAML) for a range field."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    try:
        low, high = (int(bound) for bound in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"GeneratorConfig.{name}: expected an int or a (min, max) pair, got {value!r}"
        ) from None
    if low < 0 or low > high:
        raise ValueError(f"GeneratorConfig.{name}: expected 0 <= min <= max, got {(low, high)}")
    return (low, high)


_PRESETS: dict[str, dict[str, Any]] = {
    # Clean explicit updates, one change, short chats.
    "easy": dict(
        n_sessions=(4, 6),
        n_updates=(1, 1),
        update_style="explicit",
        evidence_exchanges=(1, 2),
        distractor_exchanges=(1, 2),
        trailing_distractors=(0, 1),
    ),
    # The paper's training setting: 6-8 sessions, the update buried among distractors.
    "medium": dict(
        n_sessions=(6, 8),
        n_updates=(1, 2),
        update_style="mixed",
        evidence_exchanges=(2, 3),
        distractor_exchanges=(2, 3),
        trailing_distractors=(1, 2),
        relative_wording_prob=0.25,
        previous_value_prob=0.1,
    ),
    "hard": dict(
        n_sessions=(8, 12),
        n_updates=(2, 3),
        update_style="implicit",
        evidence_exchanges=(2, 4),
        distractor_exchanges=(3, 5),
        trailing_distractors=(1, 3),
        retraction_prob=0.3,
        relative_wording_prob=0.5,
        previous_value_prob=0.15,
        counts_weight=2.0,
    ),
    "expert": dict(
        n_sessions=(14, 20),
        n_updates=(3, 5),
        update_style="implicit",
        evidence_exchanges=(3, 4),
        distractor_exchanges=(4, 6),
        filler_chars=2500,
        trailing_distractors=(2, 4),
        retraction_prob=0.35,
        relative_wording_prob=0.6,
        previous_value_prob=0.2,
        counts_weight=2.0,
    ),
    # The saturation control: clean explicit "X is now Y" timelines, nothing else.
    EXPLICIT_TEMPLATED: dict(
        n_sessions=(4, 8),
        n_updates=(1, 3),
        update_style="explicit",
        evidence_exchanges=(1, 2),
        distractor_exchanges=(2, 3),
        trailing_distractors=(0, 2),
    ),
}


def config_for_difficulty(name: str) -> GeneratorConfig:
    """The preset for a rung of `DIFFICULTY_LADDER` (or `explicit_templated`)."""
    if name not in _PRESETS:
        raise ValueError(f"unknown difficulty {name!r}; expected one of {sorted(_PRESETS)}")
    return GeneratorConfig(name=name, **_PRESETS[name])


def next_difficulty(name: str) -> str:
    """One rung up the ladder; the top rung stays where it is."""
    if name not in DIFFICULTY_LADDER:
        raise ValueError(f"unknown difficulty {name!r}; the ladder is {DIFFICULTY_LADDER}")
    return DIFFICULTY_LADDER[min(DIFFICULTY_LADDER.index(name) + 1, len(DIFFICULTY_LADDER) - 1)]


def describe_config(config: GeneratorConfig | str) -> dict[str, Any]:
    """The config as a flat dict, plus what it implies (for notebook tables)."""
    config = _resolve_config(config)
    row: dict[str, Any] = asdict(config)
    row["domains"] = list(config.domains or FACT_DOMAINS)
    row["distractor_sessions"] = (
        max(0, config.n_sessions[0] - 1 - config.n_updates[1]),
        config.n_sessions[1] - 1 - config.n_updates[0],
    )
    return row


def _resolve_config(config: GeneratorConfig | str) -> GeneratorConfig:
    if isinstance(config, GeneratorConfig):
        return config
    if isinstance(config, str):
        return config_for_difficulty(config)
    raise TypeError(f"config must be a GeneratorConfig or a difficulty name, got {type(config).__name__}")


# --------------------------------------------------------------------------------------------
# Fact domains: what can be tracked, and many ways to talk about it
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FactDomain:
    """One kind of personal fact with its values and surface templates.

    Templates are `str.format` strings. Slots: {value} (the value stated), {old} (the value it
    replaces), {a_value} ({value} with "a"/"an"), {value_word}, {increment} and {delta} (counts and
    numbers), plus the keys of the chosen subject (e.g. {pet}, {thing}, {plural}).
    """

    name: str
    value_kind: str  # pool | money | count | race_time
    subjects: tuple[dict[str, Any], ...]  # which instance of the fact (the puppy, the 5K, ...)
    questions: tuple[str, ...]
    intro_explicit: tuple[str, ...]
    intro_implicit: tuple[str, ...]
    update_explicit: tuple[str, ...]
    update_implicit: tuple[str, ...]
    requests: tuple[tuple[str, str], ...]  # (user request, assistant reply) said around the fact
    acks: tuple[str, ...]  # assistant acknowledgements that echo {value}
    values: tuple[str, ...] = ()  # the value pool (value_kind "pool")
    previous_questions: tuple[str, ...] = ()  # the value before the latest change
    initial_questions: tuple[str, ...] = ()  # the first value
    relative_up: tuple[str, ...] = ()  # updates that give only the change ({delta}, {increment})
    relative_down: tuple[str, ...] = ()
    retractions: tuple[str, ...] = ()  # domain-specific corrections ({wrong} -> {value})

    @property
    def allows_retraction(self) -> bool:
        return self.value_kind != "count"

    @property
    def capacity(self) -> int:
        """How many distinct values one episode can use."""
        return len(self.values) if self.value_kind == "pool" else 1_000


_HOME_CITY = FactDomain(
    name="home_city",
    value_kind="pool",
    values=_pool(
        "Denver, Austin, Portland, Seattle, Chicago, Boston, Atlanta, Minneapolis, Nashville, San Diego, "
        "Philadelphia, Pittsburgh, Raleigh, Salt Lake City, Phoenix, Baltimore, Sacramento, Columbus, "
        "Kansas City, Madison, Tucson, Richmond"
    ),
    subjects=({},),
    questions=(
        "Which city do I live in?",
        "What city am I based in these days?",
        "Where do I currently live?",
        "Which city is home for me right now?",
        "What city should you assume I live in?",
    ),
    previous_questions=(
        "Which city did I live in before my most recent move?",
        "Where was I living before I last moved?",
    ),
    initial_questions=(
        "Which city did I originally live in, before any of my moves?",
        "Where was I living when I first told you where I live?",
    ),
    intro_explicit=(
        "I live in {value}.",
        "For context, I'm based in {value}.",
        "Home for me is {value}.",
        "I've lived in {value} for a few years.",
    ),
    intro_implicit=(
        "The winters here in {value} are no joke.",
        "There's a farmers market near my place in {value} that I love.",
        "My commute across {value} takes forever some mornings.",
        "Rent in {value} keeps climbing every year.",
        "Everyone in my building in {value} seems to own a bike.",
    ),
    update_explicit=(
        "Quick update: my home city is now {value}.",
        "We moved, so home is now {value} instead of {old}.",
        "Update: my city has changed to {value}.",
        "Just so you know, where I live is now {value}, not {old}.",
        "I relocated, and my home base is now {value}.",
    ),
    update_implicit=(
        "I'm still surrounded by boxes after the move to {value}.",
        "Our first few weeks in {value} have been a blur.",
        "I'm still learning my way around {value}, and I got lost twice yesterday.",
        "The new apartment in {value} gets great morning light.",
        "I miss the coffee shops in {old}, but {value} is growing on me.",
        "Since we settled in {value}, my commute has been a lot shorter.",
    ),
    retractions=(
        "Actually no, the {wrong} plan fell through at the last minute, so we ended up in {value} instead.",
        "Sorry, I misspoke about the move. It's {value}, not {wrong}; the {wrong} apartment was the one we "
        "passed on.",
    ),
    acks=(
        "Congratulations on the move to {value}!",
        "Welcome to {value}!",
        "Good to know you're in {value}.",
    ),
    requests=(
        (
            "Any tips for meeting people in a new place?",
            "A few things tend to work well: pick one recurring activity, like a running club or a weekly "
            "trivia night, so you see the same faces; say yes to invitations for the first couple of months "
            "even when you're tired; and check community boards for local events. Consistency matters more "
            "than volume.",
        ),
        (
            "What should I look for when choosing a primary care doctor?",
            "Start with who is in network for your insurance, then narrow down by location and office hours. "
            "Reviews help, but also call the office: how quickly they answer and whether they take new "
            "patients tells you a lot.",
        ),
        (
            "How do I make sure my mail and bills follow me to a new address?",
            "File a change of address with the postal service first, which forwards mail for a while. Then "
            "update your bank, cards, employer, insurance and subscriptions. Note every piece of forwarded "
            "mail over the next month and update those senders too.",
        ),
        (
            "Can you suggest some ways to explore a neighbourhood on a budget?",
            "Walking is the best tool: pick a different direction each weekend and note cafes, parks and "
            "shops. Public libraries often run free events, and many museums have free days. Local community "
            "pages usually list cheap things to do.",
        ),
        (
            "What's a good way to set up utilities without missing anything?",
            "Make a checklist: electricity, gas, water, trash, internet and renter's insurance. Book at "
            "least "
            "a week ahead, especially for internet installs, and take meter photos on move-in day in case a "
            "bill is disputed later.",
        ),
    ),
)

_EMPLOYER = FactDomain(
    name="employer",
    value_kind="pool",
    values=_pool(
        "Stripe, Deloitte, Pfizer, Shopify, Accenture, Wayfair, Etsy, Intuit, Autodesk, Zillow, "
        "Medtronic, Spotify, Atlassian, HubSpot, Genentech, Salesforce, Chewy"
    ),
    subjects=({},),
    questions=(
        "Which company do I work for?",
        "Where do I work at the moment?",
        "Who is my current employer?",
        "What company am I employed at?",
    ),
    previous_questions=(
        "Which company did I work for before my latest job change?",
        "Where was I working before my most recent job?",
    ),
    initial_questions=("Where was I working when I first told you about my job?",),
    intro_explicit=(
        "I work at {value}.",
        "My employer is {value}.",
        "I've been at {value} for about three years.",
        "For context, I'm employed at {value}.",
    ),
    intro_implicit=(
        "Our team at {value} has a big launch coming up.",
        "The cafeteria at {value} finally started serving decent coffee.",
        "My manager at {value} wants everyone back in the office twice a week.",
        "Payroll at {value} messed up my direct deposit again.",
    ),
    update_explicit=(
        "Career update: my employer is now {value}.",
        "I left {old}, and my company is now {value}.",
        "Heads up: where I work has changed to {value}.",
        "Update: my employer has changed to {value}; I'm done at {old}.",
    ),
    update_implicit=(
        "First week of onboarding at {value} and I already have forty unread chat channels.",
        "The badge photo they took on my first day at {value} is tragic.",
        "Leaving {old} was bittersweet, but the people at {value} have been great.",
        "My new team at {value} does code review very differently.",
        "Since starting at {value}, my commute is half what it was.",
    ),
    retractions=(
        "Actually no, I turned down the {wrong} offer in the end. I accepted the one from {value}.",
    ),
    acks=("Congrats on the new role at {value}!", "Good luck at {value}!", "Noted, you're with {value}."),
    requests=(
        (
            "How do I make a good impression in my first ninety days?",
            "Listen more than you talk at first, learn how decisions actually get made, and find one or two "
            "small wins you can deliver early. Ask your manager what success looks like for you in three "
            "months and check in on it regularly.",
        ),
        (
            "Any advice for asking for a raise?",
            "Bring evidence: concrete results, extra responsibilities you took on, and market data for "
            "similar roles. Ask at a sensible time, such as after a win or before budgets are set, and "
            "propose a specific number rather than a vague request.",
        ),
        (
            "How should I prepare for my performance review?",
            "Collect your wins over the period with numbers where possible, note where you struggled and "
            "what you learned, and prepare two or three goals for the next cycle. Reviews go best when "
            "nothing in them is a surprise to either side.",
        ),
        (
            "How can I say no to extra meetings politely?",
            "Ask what the meeting needs from you; often a short written update does the job. You can also "
            "offer to join only the part that is relevant, or to review the notes afterwards. Framing it "
            "around protecting time for the work itself usually lands well.",
        ),
    ),
)

_JOB_TITLE = FactDomain(
    name="job_title",
    value_kind="pool",
    values=_pool(
        "senior data analyst, product manager, UX designer, staff engineer, marketing coordinator, "
        "account executive, operations manager, research scientist, engineering manager, "
        "content strategist, QA engineer, solutions architect, financial analyst, HR business partner, "
        "customer success lead, project coordinator"
    ),
    subjects=({},),
    questions=(
        "What's my job title?",
        "What is my current role at work?",
        "What position do I hold at work these days?",
        "What's my title at work right now?",
    ),
    previous_questions=("What was my job title before my latest role change?",),
    initial_questions=("What was my job title when I first told you about it?",),
    intro_explicit=(
        "I work as {a_value}.",
        "My job title is {value}.",
        "For context, I'm {a_value} on a small team.",
    ),
    intro_implicit=(
        "Being {a_value} means my calendar is never empty.",
        "In my role as {value} I end up writing a lot of status reports.",
        "Most of my week as {a_value} goes to meetings with other teams.",
    ),
    update_explicit=(
        "I got promoted, so my title is now {value}.",
        "Update: my job title has changed to {value}.",
        "My role is now {value} instead of {old}.",
        "HR made it official: my title changed to {value}.",
    ),
    update_implicit=(
        "Since stepping up to {value}, I spend most of my day in meetings.",
        "My new business cards say {value}, which still feels strange.",
        "Going from {old} to {value} means I'm suddenly involved in hiring.",
        "Part of being {a_value} on this team is running the weekly sync.",
        "My manager said the move to {value} comes with a training budget.",
    ),
    acks=("Congratulations on becoming {a_value}!", "Well deserved, {value} suits you."),
    requests=(
        (
            "How do I run a productive one-on-one?",
            "Let the other person own most of the agenda, keep a shared running doc, and save status updates "
            "for other channels. Ask open questions about blockers and growth, and end with clear next "
            "steps.",
        ),
        (
            "How do I delegate without micromanaging?",
            "Be clear about the outcome and the deadline, then let the person choose how to get there. Agree "
            "on check-in points up front so you aren't tempted to hover, and resist redoing work that is "
            "different from how you would have done it but still good.",
        ),
        (
            "What's a simple way to prioritise incoming requests?",
            "Sort them by impact and urgency, and be explicit about what you are not doing. A short weekly "
            "list of top priorities shared with your manager makes it easier to push back on new asks.",
        ),
        (
            "How should I give critical feedback to a peer?",
            "Do it privately and soon after the event, describe the specific behaviour and its effect rather "
            "than the person, and ask for their view before suggesting a fix. Keep it to one topic at a "
            "time.",
        ),
    ),
)

_PET_NAME = FactDomain(
    name="pet_name",
    value_kind="pool",
    values=_pool(
        "Biscuit, Maple, Juniper, Pickles, Mochi, Waffles, Clover, Pepper, Ziggy, Noodle, Olive, Tofu, "
        "Hazel, Bruno, Pretzel, Sprout"
    ),
    subjects=({"pet": "puppy"}, {"pet": "kitten"}, {"pet": "rescue dog"}, {"pet": "cat"}, {"pet": "rabbit"}),
    questions=(
        "What's my {pet}'s name?",
        "What did we end up calling the {pet}?",
        "What name does my {pet} go by?",
        "What is the name of my {pet}?",
    ),
    previous_questions=(
        "What was my {pet} called before we changed her name?",
        "What name did my {pet} have before the latest rename?",
    ),
    initial_questions=("What was the first name we gave the {pet}?",),
    intro_explicit=(
        "We adopted a {pet} and named her {value}.",
        "My {pet}'s name is {value}.",
        "We're calling the new {pet} {value}.",
    ),
    intro_implicit=(
        "{value} knocked a mug off the counter again this morning, typical {pet} behaviour.",
        "I had to bribe {value} with treats to get through the vet visit.",
        "{value} finally slept through the night, so I'm feeling human again.",
    ),
    update_explicit=(
        "We renamed the {pet}: her name is now {value}.",
        "Update on the {pet}: the name has changed to {value}, since {old} just didn't suit her.",
        "The {pet}'s name is now {value} instead of {old}.",
    ),
    update_implicit=(
        "We kept calling her {value} by accident, so that's who she is; {old} never stuck.",
        "The vet's paperwork says {value} since we went with the kids' pick.",
        "{value} learned to answer to her new name in about two days.",
        "My daughter insisted on {value} for the {pet}, and honestly it fits her better.",
    ),
    acks=("{value} is a lovely name.", "Aw, {value} suits a {pet}."),
    requests=(
        (
            "How do I get the {pet} used to being home alone?",
            "Build up slowly: start with a few minutes out of sight and stretch it over days. Leave "
            "something "
            "to chew or explore, keep departures and returns calm, and make the resting spot cosy so being "
            "alone feels normal rather than alarming.",
        ),
        (
            "Which human foods are dangerous for pets?",
            "Common ones include chocolate, grapes and raisins, onions and garlic, xylitol in sugar-free "
            "gum, "
            "and cooked bones that can splinter. When in doubt, skip it and ask your vet.",
        ),
        (
            "How often should a young pet see the vet in the first year?",
            "Expect several visits early on for vaccinations and check-ups, usually every few weeks until "
            "the "
            "initial series is done, then a yearly wellness exam. Ask about spaying, microchipping and "
            "parasite "
            "prevention at the first visit.",
        ),
        (
            "Any tips to stop the {pet} chewing the furniture?",
            "Give plenty of approved things to chew, redirect calmly the moment chewing starts, and make the "
            "furniture less appealing with a bitter spray. More exercise and play time usually cuts the "
            "problem down a lot.",
        ),
    ),
)

_BUDGET = FactDomain(
    name="budget",
    value_kind="money",
    subjects=(
        {
            "thing": "mortgage pre-approval",
            "short": "pre-approval",
            "lo": 250_000,
            "hi": 650_000,
            "step": 5_000,
        },
        {"thing": "monthly grocery budget", "short": "grocery budget", "lo": 300, "hi": 1_200, "step": 25},
        {"thing": "wedding budget", "short": "wedding budget", "lo": 12_000, "hi": 60_000, "step": 500},
        {
            "thing": "kitchen renovation budget",
            "short": "renovation budget",
            "lo": 10_000,
            "hi": 80_000,
            "step": 500,
        },
        {"thing": "monthly rent limit", "short": "rent limit", "lo": 1_200, "hi": 3_500, "step": 50},
    ),
    questions=(
        "What's my {thing}?",
        "How much is my {thing}?",
        "What amount am I working with for my {thing}?",
        "Remind me: how much is my {thing} at the moment?",
    ),
    previous_questions=(
        "What was my {thing} before the last change?",
        "Before I most recently revised it, how much was my {thing}?",
    ),
    initial_questions=(
        "What was my {thing} when I first brought it up?",
        "What did my {thing} start out at?",
    ),
    intro_explicit=(
        "My {thing} is {value}.",
        "I'm working with a {thing} of {value}.",
        "We set the {short} at {value}.",
    ),
    intro_implicit=(
        "With {value} as the {short}, I'm trying to be realistic about what we can do.",
        "The {short} sits at {value} for now, so I'm comparing options.",
        "Since the {short} came to {value}, I've been adjusting my plans.",
    ),
    update_explicit=(
        "Update: my {thing} is now {value}.",
        "My {thing} has changed to {value}; it used to be {old}.",
        "Heads up, the {short} is now {value} instead of {old}.",
    ),
    update_implicit=(
        "After redoing the numbers we landed on {value} for the {short}.",
        "We went back and forth, but {value} is where the {short} ended up.",
        "I'm planning around {value} for the {short} from here on.",
        "The spreadsheet says {value} for the {short} after this week's changes.",
    ),
    relative_up=(
        "Good news: we got another {delta} of room in the {short}.",
        "We managed to raise the {short} by {delta}.",
        "The {short} went up {delta} after we looked at the numbers again.",
    ),
    relative_down=(
        "We had to trim {delta} off the {short}.",
        "The {short} came down by {delta} after an unexpected repair bill.",
        "I cut {delta} from the {short} to be safe.",
    ),
    retractions=("Sorry, I read that wrong: the {short} is {value}, not {wrong}.",),
    acks=("Thanks, I'll plan around {value} for the {short}.", "Good to know: {value} for the {short}."),
    requests=(
        (
            "How much should I keep in an emergency fund?",
            "A common rule of thumb is three to six months of essential expenses, more if your income is "
            "irregular. Keep it somewhere boring and easy to reach, like a high-yield savings account.",
        ),
        (
            "How do I track spending without a complicated app?",
            "A simple spreadsheet with a row per purchase and a handful of categories works well. Update it "
            "once a week from your bank statement, and look at the totals each month rather than every day.",
        ),
        (
            "Can you explain what a debt-to-income ratio is?",
            "It's your monthly debt payments divided by your gross monthly income. Lenders use it to judge "
            "how "
            "much more debt you can take on; lower is better, and many prefer it under about a third.",
        ),
        (
            "What's a sensible way to split shared expenses?",
            "Some couples split evenly, others in proportion to income. Whatever you pick, a joint account "
            "for "
            "shared bills plus separate personal money tends to reduce friction.",
        ),
    ),
)


def _count_subject(plural: str, verb_pp: str, verb_past: str, single: str, more_noun: str) -> dict[str, str]:
    """What is counted: "How many {plural} have I {verb_pp}?", "I {verb_past} another {single}"."""
    return {
        "plural": plural,
        "verb_pp": verb_pp,
        "verb_past": verb_past,
        "single": single,
        "more_noun": more_noun,
    }


_COUNTS = FactDomain(
    name="counts",
    value_kind="count",
    subjects=(
        _count_subject("Korean restaurants", "tried", "tried", "Korean place", "Korean places"),
        _count_subject("national parks", "visited", "visited", "national park", "national parks"),
        _count_subject("half marathons", "run", "ran", "half marathon", "half marathons"),
        _count_subject("escape rooms", "done", "did", "escape room", "escape rooms"),
        _count_subject(
            "books for my reading challenge", "finished", "finished", "challenge book", "challenge books"
        ),
        _count_subject("ramen shops", "tried", "tried", "ramen shop", "ramen shops"),
        _count_subject("board games", "bought", "bought", "board game", "board games"),
    ),
    questions=(
        "How many {plural} have I {verb_pp}?",
        "How many {plural} have I {verb_pp} so far?",
        "Up to now, how many {plural} have I {verb_pp}?",
        "What's my running total of {plural} {verb_pp}?",
    ),
    intro_explicit=(
        "So far I've {verb_pp} {value} {plural}.",
        "Running count: {value} {plural} {verb_pp} so far.",
        "I've {verb_pp} {value} {plural} up to this point.",
    ),
    intro_implicit=(
        "Out of the {value_word} {plural} I've {verb_pp} so far, the most recent was the best.",
        "I've only {verb_pp} {value_word} {plural} so far, so I'm no expert.",
    ),
    update_explicit=(
        "My count of {plural} {verb_pp} is now {value}.",
        "Update: the number of {plural} I've {verb_pp} is now {value}.",
        "Tally update: my total of {plural} has changed to {value}.",
    ),
    update_implicit=(
        "Just {verb_past} {increment}, which makes {value_word} in total.",
        "That brings my total to {value_word} {plural} {verb_pp}.",
    ),
    relative_up=(
        "I {verb_past} {increment} last weekend.",
        "Finally {verb_past} {increment}, and the wait was worth it.",
        "Quick brag: I {verb_past} {increment} this month.",
    ),
    acks=("{value} {plural}, nice progress!", "That's {value} {plural}, impressive."),
    requests=(
        (
            "What's a low-effort way to keep a log of the {plural} I've {verb_pp}?",
            "Keep the log where you already are, such as a note on your phone, and record one line per entry "
            "with a date and a few words. Reviewing it once a month is usually enough to stay motivated.",
        ),
        (
            "Any ideas for making my {more_noun} habit more social?",
            "Invite a friend along for the next one, look for a local group that shares the same goal, or "
            "post short write-ups for people who are curious. Shared goals tend to stick.",
        ),
        (
            "How do I pick what to do next from a long wish list?",
            "Filter by what is realistic this month, then pick the option you are most curious about rather "
            "than the one you think you should do. Momentum matters more than order.",
        ),
        (
            "Do you have tips for writing short notes so I remember each of the {plural}?",
            "Jot down three things right away: what stood out, what you would change, and whether you would "
            "go back or recommend it. A photo plus those three lines is enough to jog your memory months "
            "later.",
        ),
        (
            "How do I keep a personal goal fun instead of turning it into a chore?",
            "Make the goal serve the fun, not the other way round. Skip a month without guilt if life gets "
            "busy, and mix easy picks with ambitious ones.",
        ),
    ),
)

_SCHEDULE = FactDomain(
    name="schedule",
    value_kind="pool",
    values=("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    subjects=(
        {"activity": "piano lesson"},
        {"activity": "book club meeting"},
        {"activity": "volunteer shift at the food bank"},
        {"activity": "five-a-side football game"},
        {"activity": "weekly call with my sister"},
        {"activity": "pottery class"},
    ),
    questions=(
        "What day is my {activity}?",
        "Which day of the week do I have my {activity}?",
        "On what day is my {activity} these days?",
    ),
    previous_questions=("Which day was my {activity} on before it was moved most recently?",),
    initial_questions=("What day was my {activity} originally on?",),
    intro_explicit=(
        "My {activity} is on {value}s.",
        "I have my {activity} every {value}.",
        "For context, my {activity} happens every {value}.",
    ),
    intro_implicit=(
        "I always leave work a little early on {value}s because of my {activity}.",
        "My {activity} eats up {value} evenings, so I batch-cook on the weekend.",
        "After my {activity} on {value} I'm usually wiped out.",
    ),
    update_explicit=(
        "Update: my {activity} is now on {value}s.",
        "My {activity} has changed to {value}s; it used to be {old}s.",
        "Heads up, the day of my {activity} is now {value} instead of {old}.",
    ),
    update_implicit=(
        "The organiser moved my {activity} to {value}s, so I'm rearranging my week.",
        "With my {activity} on {value}s from here on, my evenings look different.",
        "I'll be ducking out early on {value}s for the {activity} going forward.",
        "I keep forgetting the {activity} is on {value} these days and almost missed it.",
    ),
    acks=("{value}s it is, then.", "Thanks, I'll remember the {activity} is on {value}s."),
    requests=(
        (
            "How do I stop overcommitting my evenings?",
            "Decide in advance how many evenings a week you want free and protect them like appointments. "
            "Before saying yes to something new, ask what it would replace, and give yourself a day before "
            "answering invitations.",
        ),
        (
            "Any tips for keeping a shared family calendar?",
            "Use one calendar everyone can see on their phone, give each person a colour, and agree that "
            "nothing counts unless it is on the calendar. A short weekly look at the coming days avoids most "
            "surprises.",
        ),
        (
            "How can I make a weekly routine stick?",
            "Anchor new habits to things you already do, start smaller than you think you need to, and track "
            "streaks loosely. Plan for the weeks that go wrong so one missed day doesn't end the routine.",
        ),
        (
            "How do I politely reschedule something I've already committed to?",
            "Tell them as early as you can, apologise briefly without over-explaining, and offer one or two "
            "concrete alternatives. Making it easy for the other person to say yes is the kind part.",
        ),
        (
            "What's a good way to plan meals around a busy week?",
            "Pick two or three simple dinners that reheat well, cook them when you have a free evening, and "
            "keep a fallback meal in the freezer for the nights that go sideways.",
        ),
    ),
)

_CAR = FactDomain(
    name="car",
    value_kind="pool",
    values=_pool(
        "Honda Civic, Subaru Outback, Toyota RAV4, Mazda CX-5, Tesla Model 3, Ford F-150, "
        "Hyundai Ioniq 5, Kia Telluride, Volkswagen Golf, Chevy Bolt, Volvo XC40, Jeep Wrangler, "
        "Toyota Prius, Nissan Leaf, Honda CR-V"
    ),
    subjects=({},),
    questions=(
        "What car do I drive?",
        "Which car am I driving these days?",
        "What's my current car?",
        "What vehicle do I own right now?",
    ),
    previous_questions=(
        "What car did I drive before my latest one?",
        "Which car did I have before I last switched?",
    ),
    initial_questions=("What car was I driving when I first mentioned my car?",),
    intro_explicit=("I drive a {value}.", "My car is a {value}.", "For context, I've got a {value}."),
    intro_implicit=(
        "The check engine light on my {value} came on again.",
        "Fitting a stroller into the back of my {value} is a puzzle.",
        "My {value} needs new tires before winter.",
    ),
    update_explicit=(
        "Update: my car is now a {value}.",
        "I traded in the {old}, so my car is now a {value}.",
        "My ride has changed to a {value}.",
    ),
    update_implicit=(
        "Picking up the {value} from the dealership was the easy part; now I have to learn all the buttons.",
        "The {value} gets way better mileage than the {old} did.",
        "Finally sold the {old} and drove the {value} home the same day.",
        "The backup camera on the {value} has already saved me twice.",
    ),
    retractions=(
        "Actually no, the {wrong} deal fell apart at the dealership. I drove home in a {value} instead.",
    ),
    acks=("Congrats on the {value}!", "Enjoy the {value}!"),
    requests=(
        (
            "How often should I rotate my tires?",
            "Every five to eight thousand miles is typical, often at the same time as an oil change. Check "
            "your owner's manual, since some vehicles have specific patterns.",
        ),
        (
            "What should I keep in a winter emergency kit for the car?",
            "A blanket, gloves, a flashlight, jumper cables, an ice scraper, a small shovel, water and some "
            "snacks. A phone charger and a bag of sand or cat litter for traction are also handy.",
        ),
        (
            "Is an extended warranty worth it?",
            "Often not, since the price includes a healthy profit margin. It can make sense for models with "
            "known expensive repairs, but setting the money aside yourself usually works out better.",
        ),
        (
            "How can I get better fuel economy?",
            "Keep tires properly inflated, accelerate gently, avoid long idling and remove roof racks when "
            "you don't need them. Regular maintenance helps more than most tricks.",
        ),
    ),
)

_GYM = FactDomain(
    name="gym",
    value_kind="pool",
    values=_pool(
        "Planet Fitness, Equinox, Crunch Fitness, Orangetheory, Gold's Gym, Anytime Fitness, "
        "Blink Fitness, CorePower Yoga, Movement Climbing, 24 Hour Fitness, F45, YMCA"
    ),
    subjects=({},),
    questions=(
        "Which gym do I go to?",
        "What gym am I a member of?",
        "Where do I work out these days?",
        "Which gym membership do I have?",
    ),
    previous_questions=("Which gym was I going to before I switched most recently?",),
    initial_questions=("Which gym did I belong to when I first mentioned working out?",),
    intro_explicit=("I'm a member at {value}.", "I work out at {value}.", "My gym is {value}."),
    intro_implicit=(
        "The early crowd at {value} is surprisingly intense.",
        "Someone at {value} left their water bottle in my locker again.",
        "The squat racks at {value} are always taken after work.",
    ),
    update_explicit=(
        "I cancelled my old membership, so my gym is now {value}.",
        "My gym has changed to {value}.",
        "Update: my gym is now {value} rather than {old}.",
    ),
    update_implicit=(
        "The classes at {value} are tougher than anything I did at {old}.",
        "Signing up at {value} came with a free session with a trainer.",
        "Since joining {value}, I actually look forward to early workouts.",
        "The locker rooms at {value} are spotless compared to {old}.",
    ),
    acks=("Nice, {value} has a good reputation.", "Enjoy {value}!"),
    requests=(
        (
            "How many rest days should I take each week?",
            "Most people do well with one or two full rest days plus lighter days in between hard sessions. "
            "If your performance stalls or you feel run down, take more rest rather than less.",
        ),
        (
            "Can you suggest a thirty-minute full-body workout?",
            "Try three rounds of squats, push-ups, dumbbell rows, lunges and a plank, forty seconds each "
            "with "
            "twenty seconds rest. Warm up for five minutes first and stretch afterwards.",
        ),
        (
            "What should I eat before a morning workout?",
            "Something small and easy to digest about thirty to sixty minutes before, like a banana, toast "
            "with peanut butter or yogurt. Save the bigger meal for afterwards.",
        ),
        (
            "How do I track progress without obsessing over the scale?",
            "Log what you lift or how long you run, take a photo or measurement once a month, and notice "
            "energy and sleep. Those change sooner and say more than weight alone.",
        ),
        (
            "Is it worth paying for a personal trainer?",
            "A few sessions can be very worthwhile to learn good form and get a plan. After that, a "
            "check-in every month or two keeps you honest without the full cost.",
        ),
    ),
)

_HOBBY = FactDomain(
    name="hobby",
    value_kind="pool",
    values=_pool(
        "pottery, rock climbing, watercolor painting, woodworking, birdwatching, knitting, salsa dancing, "
        "chess, archery, fencing, calligraphy, beekeeping, kayaking, embroidery"
    ),
    subjects=({},),
    questions=(
        "What hobby am I into these days?",
        "What's my current hobby?",
        "Which hobby have I been spending my free time on lately?",
        "What do I do for fun at the moment?",
    ),
    previous_questions=("What hobby was I into before my current one?",),
    initial_questions=("What was my hobby when I first told you about it?",),
    intro_explicit=(
        "My main hobby is {value}.",
        "In my free time I do {value}.",
        "I've really gotten into {value}.",
    ),
    intro_implicit=(
        "I spent the whole weekend on {value} again and lost track of time.",
        "My partner says I talk about {value} too much.",
        "I've been reading everything I can find about {value} lately.",
    ),
    update_explicit=(
        "My hobby is now {value}; I've dropped {old}.",
        "Update: my main hobby has changed to {value}.",
        "Hobby update: what I do for fun is now {value} instead of {old}.",
    ),
    update_implicit=(
        "I haven't touched {old} in weeks, because {value} has taken over my evenings.",
        "Signed up for a beginner {value} course and I'm hooked.",
        "The {value} group I joined is so welcoming.",
        "I sold my {old} stuff to make room for {value} supplies.",
    ),
    acks=("{value} is a great thing to pick up.", "Have fun with {value}!"),
    requests=(
        (
            "How do I stay motivated when a new hobby gets hard?",
            "Expect a plateau after the first excitement wears off and plan for it. Set tiny goals, keep a "
            "record of early attempts so you can see progress, and find at least one person to share it "
            "with.",
        ),
        (
            "How do I find a local club for something like this?",
            "Search community centres, library event listings and meetup sites, and ask at the shop where "
            "you "
            "buy supplies. Clubs often welcome beginners even when their pages look intimidating.",
        ),
        (
            "How much should I spend when I'm just starting out?",
            "As little as possible until you know you'll stick with it: borrow, rent or buy second-hand, and "
            "upgrade one piece at a time once you know what actually limits you.",
        ),
        (
            "How do I make time for a hobby during a busy week?",
            "Treat it like an appointment: block a short, regular slot, keep your materials somewhere "
            "visible, and aim for twenty focused minutes rather than waiting for a free afternoon.",
        ),
        (
            "Any tips for learning from online videos?",
            "Pick one teacher whose style you like and follow a series in order rather than jumping around. "
            "Pause often, try each step yourself, and rewatch the parts that went wrong.",
        ),
    ),
)

_PHONE_PLAN = FactDomain(
    name="phone_plan",
    value_kind="pool",
    values=_pool(
        "Mint Mobile, Verizon, T-Mobile, Google Fi, AT&T, Cricket Wireless, US Mobile, Boost Mobile, "
        "Consumer Cellular, Xfinity Mobile"
    ),
    subjects=({},),
    questions=(
        "Which mobile carrier am I with?",
        "What phone carrier do I use?",
        "Who is my cell phone provider?",
        "Which carrier is my phone plan with these days?",
    ),
    previous_questions=("Which carrier was I with before I last switched?",),
    initial_questions=("Which phone carrier was I with when I first mentioned my plan?",),
    intro_explicit=(
        "My phone plan is with {value}.",
        "I'm on {value} for my phone.",
        "My carrier is {value}.",
    ),
    intro_implicit=(
        "Coverage from {value} is terrible in my basement.",
        "I got another promo text from {value} about upgrading my phone.",
        "{value} charged me a roaming fee again after my last trip.",
    ),
    update_explicit=(
        "I switched carriers, so my phone plan is now with {value}.",
        "Update: my carrier has changed to {value}.",
        "My provider is now {value} instead of {old}.",
    ),
    update_implicit=(
        "Porting my number over to {value} took all of ten minutes.",
        "My bill with {value} is about half what I paid {old}.",
        "The {value} SIM card arrived and I'm finally free of {old}.",
        "Signal has been better since I moved my line to {value}.",
    ),
    acks=("Hope {value} treats you well!", "Noted, you're with {value}."),
    requests=(
        (
            "How do I check how much data I'm using?",
            "Your phone's settings show mobile data use per app, and most carriers have an app or account "
            "page "
            "with the official count. Reset the phone's counter on your billing date so the two line up.",
        ),
        (
            "Should I buy my next phone outright or pay monthly?",
            "Buying outright is usually cheaper overall and lets you pick any plan. Paying monthly spreads "
            "the "
            "cost but can lock you in, so compare the total over the whole term.",
        ),
        (
            "How do I set up Wi-Fi calling?",
            "It's usually a toggle in the phone's call or network settings, and some carriers ask you to "
            "confirm an emergency address first. It helps a lot in places with weak signal.",
        ),
        (
            "Any tips for lowering my phone bill?",
            "Check what you actually use each month and drop to the smallest plan that covers it, ask about "
            "autopay and loyalty discounts, and look at prepaid options that run on the big networks.",
        ),
        (
            "Is it safe to use public Wi-Fi?",
            "It's fine for casual browsing on sites that use HTTPS, but avoid banking on open networks. A "
            "reputable VPN or your phone's hotspot is safer for anything sensitive.",
        ),
    ),
)

_PARTNER_NAME = FactDomain(
    name="partner_name",
    value_kind="pool",
    values=_pool(
        "Priya, Marcus, Elena, Jonah, Sofia, Daniel, Amara, Theo, Nadia, Rafael, Hannah, Kenji, Leila, "
        "Owen, Camila, Isaac"
    ),
    subjects=({},),
    questions=(
        "What's my partner's name?",
        "Who am I dating right now?",
        "What is the name of the person I'm seeing?",
        "Who is my current partner?",
    ),
    previous_questions=(
        "Who was I dating before my current partner?",
        "What was my previous partner's name?",
    ),
    initial_questions=("Who was I with when I first mentioned my partner?",),
    intro_explicit=(
        "My partner's name is {value}.",
        "I've been seeing someone called {value}.",
        "{value} and I have been together for about a year.",
    ),
    intro_implicit=(
        "{value} and I are trying to plan a weekend away.",
        "{value} keeps stealing my hoodies.",
        "I'm cooking dinner for {value}'s parents next week and I'm nervous.",
    ),
    update_explicit=(
        "{old} and I split up, and my partner is now {value}.",
        "Relationship update: the person I'm dating is now {value}.",
        "Update: my partner is now {value}; things with {old} are over.",
    ),
    update_implicit=(
        "Things with {old} ended a while ago, and {value} and I just had our third date.",
        "{value} and I are taking a cooking class together; still early days, but it's going well.",
        "I met {value} at a friend's birthday and we've been inseparable since.",
        "I'm meeting {value}'s friends for the first time soon.",
    ),
    acks=("That's lovely, I'm happy for you and {value}.", "{value} sounds great."),
    requests=(
        (
            "Can you suggest some low-key date ideas?",
            "Cook a new recipe together, take a long walk somewhere you haven't been, visit a small museum, "
            "or "
            "try a board game cafe. Low-key dates work best when there's something to do with your hands.",
        ),
        (
            "What's a thoughtful gift that isn't expensive?",
            "Something that shows you listen: a book by an author they mentioned, a favourite snack from "
            "childhood, or an outing planned around something they've wanted to try.",
        ),
        (
            "Any tips for a first trip together?",
            "Keep it short and close to home, agree on a rough budget before booking, and leave plenty of "
            "unplanned time. Talk about how each of you likes to travel before you go.",
        ),
        (
            "How do we split chores fairly when we both work?",
            "List every recurring chore, including the invisible ones like planning meals, then divide by "
            "preference and time rather than by count. Revisit it after a month.",
        ),
        (
            "How do I bring up something that's bothering me without starting a fight?",
            "Pick a calm moment, describe the specific situation and how it made you feel, and ask for "
            "their view before proposing a fix. Focus on one issue at a time.",
        ),
    ),
)

_PERSONAL_BEST = FactDomain(
    name="personal_best",
    value_kind="race_time",
    subjects=(
        {"event": "5K", "lo": 21 * 60, "hi": 32 * 60},
        {"event": "10K", "lo": 40 * 60, "hi": 59 * 60},
        {"event": "mile", "lo": 7 * 60, "hi": 10 * 60},
    ),
    questions=(
        "What's my personal best {event} time?",
        "What is my current {event} PR?",
        "What's my fastest {event} time?",
        "How fast is my best {event} so far?",
    ),
    previous_questions=("What was my {event} personal best before my most recent PR?",),
    initial_questions=("What was my {event} personal best when I first mentioned it?",),
    intro_explicit=(
        "My {event} personal best is {value}.",
        "My fastest {event} so far is {value}.",
        "My {event} PR stands at {value}.",
    ),
    intro_implicit=(
        "My watch still shows {value} as my best {event}, and I'd love to beat it.",
        "Ever since I ran {value} in the {event} last spring, I've been stuck on a plateau.",
    ),
    update_explicit=(
        "New PR! My {event} personal best is now {value}.",
        "Update: my fastest {event} is now {value}, down from {old}.",
        "My {event} record has changed to {value}.",
    ),
    update_implicit=(
        "Crossed the line at {value} in this weekend's {event}, a new best by a lot.",
        "Knocked my {event} down to {value} at the local race.",
        "Clocked {value} for the {event} this morning and nearly cried at the finish.",
    ),
    relative_down=(
        "Shaved {delta} off my {event} personal best this weekend.",
        "Took another {delta} off my best {event} time at the local race.",
        "My {event} PR dropped by {delta} at the track this morning.",
    ),
    retractions=(
        "Actually no, my watch auto-paused at a crossing. The official {event} time was {value}, not "
        "{wrong}.",
    ),
    acks=("{value} is a great time, congratulations!", "Nice, {value} for the {event}!"),
    requests=(
        (
            "How should I taper before a race?",
            "Cut your weekly volume by roughly a third to a half over the last one to two weeks while "
            "keeping "
            "a little intensity, so your legs stay sharp without being tired.",
        ),
        (
            "What's a good interval workout for speed?",
            "Try six to eight repeats of four hundred metres at goal pace or slightly faster, with equal "
            "time "
            "of easy jogging in between. Warm up and cool down properly.",
        ),
        (
            "How do I avoid shin splints?",
            "Increase mileage gradually, run on softer surfaces when you can, replace worn shoes, and add "
            "calf and hip strength work. Rest at the first sign of sharp pain.",
        ),
        (
            "What should I eat the night before a race?",
            "Something familiar and carbohydrate-rich, like pasta or rice with a simple sauce, without too "
            "much fibre or fat. Nothing new the night before.",
        ),
        (
            "How many easy runs should I do each week?",
            "Most of your running, often around eighty percent, should be at an easy conversational pace. "
            "It builds the base that makes the hard sessions count.",
        ),
    ),
)

FACT_DOMAINS: dict[str, FactDomain] = {
    domain.name: domain
    for domain in (
        _HOME_CITY,
        _EMPLOYER,
        _JOB_TITLE,
        _PET_NAME,
        _BUDGET,
        _COUNTS,
        _SCHEDULE,
        _CAR,
        _GYM,
        _HOBBY,
        _PHONE_PLAN,
        _PARTNER_NAME,
        _PERSONAL_BEST,
    )
}

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


# --------------------------------------------------------------------------------------------
# Distractor sessions: plausible chats on other topics
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DistractorTopic:
    """A chat topic unrelated to the tracked fact. Slots come from `_distractor_slots`."""

    name: str
    exchanges: tuple[tuple[str, str], ...]
    details: tuple[str, ...]  # extra advice sentences for longer sessions and filler


DISTRACTOR_TOPICS: tuple[DistractorTopic, ...] = (
    DistractorTopic(
        name="cooking",
        exchanges=(
            (
                "I want to make {dish} this weekend but I've never tried it. Where should I start?",
                "Good choice; {dish} is forgiving once you get the basics right. Read the whole recipe "
                "first, "
                "prep every ingredient before the heat goes on, and taste as you go rather than at the end. "
                "For a first attempt, halve the recipe so a mistake doesn't waste much.",
            ),
            (
                "How do I keep fresh herbs from wilting so fast?",
                "Treat soft herbs like cut flowers: trim the stems, stand them in a glass of water, and "
                "loosely "
                "cover the leaves with a bag in the fridge. Basil is the exception and prefers the counter. "
                "Hardy herbs like rosemary last longest wrapped in a slightly damp paper towel.",
            ),
            (
                "What's a good substitute for buttermilk?",
                "Stir a tablespoon of lemon juice or white vinegar into a cup of regular milk and let it sit "
                "for about ten minutes until it thickens slightly. Plain yogurt thinned with a little milk "
                "also works well in baking.",
            ),
            (
                "Can you give me a few ideas for quick weeknight dinners?",
                "Sure. Sheet-pan sausages with peppers and onions, vegetable fried rice with leftover rice, "
                "pasta with garlic, chili flakes and greens, or bean and cheese quesadillas. Each takes "
                "about "
                "thirty minutes and uses pantry staples.",
            ),
            (
                "Why does my rice always turn out mushy?",
                "Usually it's too much water or too much stirring. Rinse the rice until the water runs "
                "mostly "
                "clear, measure the water carefully, and keep the lid on while it simmers. Let it rest off "
                "the "
                "heat for ten minutes before fluffing it with a fork.",
            ),
            (
                "My friend {friend} is coming over for dinner and doesn't eat meat. Any crowd-pleasers?",
                "A few reliable options: a mushroom and lentil shepherd's pie, a tray of roasted vegetable "
                "lasagna, or a chickpea curry with rice and flatbread. All of them can be made ahead, which "
                "leaves you free to enjoy the evening.",
            ),
        ),
        details=(
            "Salt pasta water generously; it is your one chance to season the noodles themselves.",
            "A hot pan and dry ingredients are the secret to a proper sear.",
            "Resting meat for a few minutes after cooking keeps the juices in.",
            "A squeeze of lemon or a splash of vinegar at the end brightens almost any dish.",
            "Keep a small notebook of what you changed each time you cook a recipe.",
            "Toasting spices in a dry pan for a minute wakes up their flavour.",
            "Having everything chopped and measured before you start prevents most kitchen panic.",
            "Day-old rice makes better fried rice than freshly cooked rice.",
        ),
    ),
    DistractorTopic(
        name="travel",
        exchanges=(
            (
                "I'm planning a trip to {destination} next spring. How many days would you recommend?",
                "For a first visit to {destination}, five to seven days is a comfortable range. That gives "
                "you "
                "time for the main sights, a day trip or two, and some slack for weather or jet lag. With "
                "only "
                "a long weekend, focus on one or two neighbourhoods.",
            ),
            (
                "What's the best way to find cheap flights?",
                "Be flexible with dates, since mid-week departures are often cheaper. Set price alerts on a "
                "couple of comparison sites, check nearby airports, and book one to three months ahead for "
                "most international routes.",
            ),
            (
                "Should I get travel insurance for a two-week trip?",
                "It's usually worth it for longer or more expensive trips. Look for medical, cancellation "
                "and "
                "lost luggage coverage, check whether your credit card already includes some of it, and read "
                "the exclusions carefully.",
            ),
            (
                "How do I pack light for a week away?",
                "Pick a simple colour palette so everything mixes and matches, plan on one small load of "
                "laundry, and wear your bulkiest items on the plane. Packing cubes help, and three pairs of "
                "shoes at most keeps the bag manageable.",
            ),
            (
                "My friend {friend} says I should stop over in {city} on the way. Is a two-day stopover "
                "worth it?",
                "A two-day stopover can break up a long journey nicely. If the connection adds little cost, "
                "you get a taste of a second place without much extra planning. Keep the first evening "
                "light, "
                "since travel days are more tiring than expected.",
            ),
            (
                "What can I do about jet lag?",
                "Shift your sleep an hour or so per day before you leave if possible, get outside in "
                "daylight "
                "when you arrive, and avoid long naps on the first day. Keep caffeine to the morning.",
            ),
        ),
        details=(
            "Keep digital and paper copies of your passport and bookings.",
            "Tell your bank about your travel dates so your cards are not blocked.",
            "A small first-aid kit and a universal adapter take up little space and save hassle.",
            "Learning a few local phrases goes a long way with shopkeepers and waiters.",
            "Booking the first night's accommodation in advance makes arrival much calmer.",
            "Public transport passes for several days are often cheaper than single tickets.",
            "Leave one unplanned afternoon; it often becomes the best part of the trip.",
        ),
    ),
    DistractorTopic(
        name="coding",
        exchanges=(
            (
                "My Python script throws a KeyError when I read a config file. How should I debug it?",
                "A KeyError means the dictionary doesn't contain the key you asked for. Print the keys you "
                "actually loaded, check for typos or different capitalisation, and make sure you are reading "
                "the file you think you are. If the key is optional, use dict.get with a default.",
            ),
            (
                "What's the difference between a list and a tuple in Python?",
                "Both hold ordered sequences, but a list can be changed after creation while a tuple cannot. "
                "Use tuples for fixed records, such as coordinates or dictionary keys, and lists when you "
                "need "
                "to append, remove or sort items.",
            ),
            (
                "How do I undo my last git commit without losing the changes?",
                "Run git reset --soft HEAD~1. That moves the branch back one commit but keeps your changes "
                "staged, so you can edit them and commit again. If you already pushed, prefer git revert so "
                "you don't rewrite shared history.",
            ),
            (
                "Can you explain what a race condition is?",
                "A race condition happens when the result of a program depends on the timing of operations "
                "that run concurrently. Two threads reading and then incrementing the same counter can both "
                "read the old value, so one update is lost. Locks or atomic operations prevent it.",
            ),
            (
                "How should I structure unit tests for a small project?",
                "Mirror your source layout in a tests folder, keep each test focused on one behaviour, and "
                "name tests after what should happen. Use fixtures for shared setup, and make sure each test "
                "can actually fail.",
            ),
            (
                "Why is my SQL query so slow on a big table?",
                "The usual culprit is a missing index on the columns used in filters or joins. Run EXPLAIN "
                "to "
                "see whether the database scans the whole table, add an index where it helps, and avoid "
                "wrapping indexed columns in functions inside the filter.",
            ),
        ),
        details=(
            "Reproduce the bug with the smallest possible input before changing any code.",
            "Read the full traceback from the bottom up; the last line names the actual error.",
            "Commit small, focused changes so that any one of them is easy to revert.",
            "A linter and a formatter catch whole classes of mistakes before you run anything.",
            "Write the test that exposes the bug first, then fix the code until it passes.",
            "Logging the inputs of a failing function often explains the problem faster than a debugger.",
            "Keep configuration out of the code so the same program runs in every environment.",
        ),
    ),
    DistractorTopic(
        name="home_repair",
        exchanges=(
            (
                "There's a small leak under my kitchen sink. Can I fix it myself?",
                "Often yes. Dry everything, run the water and watch exactly where it drips. Loose slip nuts "
                "on "
                "the drain can usually be hand-tightened, while a leak at the supply line may need a new "
                "hose. "
                "Turn off the shut-off valve before disconnecting anything.",
            ),
            (
                "How do I patch a small hole in drywall?",
                "For holes smaller than a coin, spackle is enough: fill, let it dry, sand lightly and paint. "
                "Larger holes need a self-adhesive mesh patch with two or three thin coats of joint "
                "compound, "
                "feathered out wider each time.",
            ),
            (
                "My bathroom fan doesn't seem to pull any air. What should I check?",
                "Hold a sheet of tissue near the grille; if it isn't pulled up, the fan or the duct is the "
                "problem. Clean the dust off the blades, then check that the duct isn't crushed or "
                "disconnected. Older fans sometimes just wear out and are cheap to replace.",
            ),
            (
                "What tools should every renter keep at home?",
                "A screwdriver with interchangeable bits, a hammer, a tape measure, an adjustable wrench, "
                "pliers, a utility knife, a level and, if you can, a cordless drill. Add a plunger and a "
                "flashlight and you're ready for most small emergencies.",
            ),
            (
                "How often should I replace the air filter in my furnace?",
                "Every one to three months is typical. Check it monthly during heavy use; if it looks grey "
                "and "
                "clogged, swap it. Households with pets or allergies benefit from changing it more often.",
            ),
        ),
        details=(
            "Take a photo before you disconnect anything so you know how it goes back together.",
            "Painter's tape and a drop cloth make cleanup far easier than being careful.",
            "Know where your main water shut-off valve is before you ever need it.",
            "Thin coats of filler sand much more easily than one thick coat.",
            "A stud finder saves a lot of guesswork when hanging heavy shelves.",
            "When in doubt about wiring, switch off the breaker and call an electrician.",
        ),
    ),
    DistractorTopic(
        name="language_learning",
        exchanges=(
            (
                "I want to start learning {language}. What's a realistic first goal?",
                "A good first goal in {language} is handling simple everyday exchanges: greetings, ordering "
                "food, asking for directions and talking about yourself. Aim for a little practice every day "
                "rather than long sessions once a week.",
            ),
            (
                "Are language apps actually enough to become conversational?",
                "They're great for vocabulary and a daily habit, but on their own they rarely get people "
                "speaking comfortably. Pair an app with listening to real content and regular conversation "
                "practice, even fifteen minutes a week with a tutor.",
            ),
            (
                "How do I stop freezing up when I try to speak?",
                "Prepare a few go-to phrases for buying time, like asking someone to repeat or slow down. "
                "Practise short scripted conversations out loud, and remember that being understood matters "
                "more than being perfect.",
            ),
            (
                "What's the best way to memorise vocabulary?",
                "Spaced repetition works well: review words just before you would forget them. Learn words "
                "in "
                "short phrases rather than alone, and use new words in a sentence about your own life.",
            ),
            (
                "My coworker {friend} speaks {language} fluently. Is it awkward to ask for practice?",
                "Most people are happy to help if you keep it low pressure. Suggest something small, like "
                "chatting in {language} for ten minutes over lunch, and offer something in return.",
            ),
        ),
        details=(
            "Listening to the same short recording many times trains your ear faster than variety.",
            "Labelling objects around the house is a cheap way to pick up everyday nouns.",
            "Shadowing, repeating a speaker right after them, helps rhythm and pronunciation.",
            "Keep a small notebook of phrases you wanted to say but couldn't.",
            "Children's books and graded readers are a gentle first step into reading.",
            "Mistakes are part of the process; most listeners care about meaning, not grammar.",
        ),
    ),
    DistractorTopic(
        name="books_and_films",
        exchanges=(
            (
                "Can you recommend a gripping mystery novel for a long flight?",
                "Try a classic country-house mystery if you like puzzles, or a modern psychological thriller "
                "if you prefer pace. Something with short chapters is easy to pick up and put down between "
                "meals and naps.",
            ),
            (
                "I just finished a great sci-fi series and feel lost. What should I read next?",
                "That post-series slump is real. Try a standalone novel from a different corner of the "
                "genre, "
                "such as first-contact stories or near-future thrillers, so you aren't comparing it to the "
                "series you loved. A short story collection also works as a palate cleanser.",
            ),
            (
                "What's a good movie for a cosy night in?",
                "A warm comedy or a feel-good drama usually hits the spot. Animated films are underrated for "
                "this too: many are beautifully made and gentle without being childish.",
            ),
            (
                "How can I read more when I'm busy?",
                "Carry a book or reader everywhere so small gaps become reading time, swap some phone "
                "scrolling for a chapter, and try audiobooks for commutes and chores.",
            ),
            (
                "My friend {friend} wants a book our group can really discuss. Any ideas?",
                "Books with morally complicated characters or an unreliable narrator tend to spark the best "
                "discussions. Literary fiction under four hundred pages is a safe bet, since everyone is "
                "more "
                "likely to finish it in time.",
            ),
        ),
        details=(
            "Library apps let you borrow e-books and audiobooks for free.",
            "Giving a book fifty pages before deciding to stop is a fair rule.",
            "Watching a film adaptation after reading the book makes for good conversation.",
            "Reading reviews after you finish, not before, keeps surprises intact.",
            "Keeping a short list of what you read each year is satisfying to look back on.",
        ),
    ),
    DistractorTopic(
        name="personal_finance",
        exchanges=(
            (
                "How do I start budgeting if I've never done it?",
                "Start by tracking what you actually spend for a month without judging it. Then group "
                "spending "
                "into a few categories, decide what feels right for each, and automate savings so it happens "
                "before you can spend it.",
            ),
            (
                "What's the difference between a Roth and a traditional retirement account?",
                "The main difference is when you pay tax. A traditional account usually gives a tax break "
                "now "
                "and taxes withdrawals later, while a Roth taxes the money now and qualified withdrawals are "
                "tax-free. Which is better depends on your tax rate now versus in retirement.",
            ),
            (
                "Is it better to pay off debt or save first?",
                "A common approach is a small cash buffer first, then high-interest debt, since it costs "
                "more "
                "than savings earn. After that, grow the emergency fund and raise retirement saving, "
                "especially "
                "to capture any employer match.",
            ),
            (
                "How can I cut down on subscriptions I forget about?",
                "Go through your last two bank statements and list every recurring charge. Cancel anything "
                "you "
                "haven't used in a month, and set reminders a few days before free trials end.",
            ),
        ),
        details=(
            "Automatic transfers on payday make saving the default rather than a decision.",
            "Index funds keep costs low and spread risk across many companies.",
            "Checking your credit report once a year catches errors early.",
            "A separate account for irregular expenses smooths out lumpy months.",
            "Big purchases feel different after a forty-eight hour waiting period.",
        ),
    ),
    DistractorTopic(
        name="balcony_garden",
        exchanges=(
            (
                "My basil keeps bolting. What am I doing wrong?",
                "Basil flowers when it is stressed by heat or isn't harvested often enough. Pinch off the "
                "top "
                "leaves regularly, remove flower buds as soon as you see them, and give it some afternoon "
                "shade during heatwaves.",
            ),
            (
                "What are easy vegetables for a small balcony?",
                "Cherry tomatoes, salad greens, radishes, bush beans and herbs all do well in containers. "
                "Choose compact varieties, use potting mix rather than garden soil, and make sure the pots "
                "have drainage holes.",
            ),
            (
                "How often should I water potted plants in summer?",
                "Check the soil rather than following a fixed schedule: if the top few centimetres are dry, "
                "water deeply until it runs out the bottom. Small pots may need water every day in hot "
                "weather.",
            ),
            (
                "Is it worth composting if I live in an apartment?",
                "It can be, if you have a use for the compost or a community garden to share it with. A "
                "small "
                "worm bin or a bokashi bucket works indoors without much smell when managed well.",
            ),
        ),
        details=(
            "Morning watering loses less to evaporation than watering at midday.",
            "Grouping pots together raises humidity around the plants.",
            "A layer of mulch on top of the soil keeps containers from drying out so fast.",
            "Yellow lower leaves often mean overwatering rather than thirst.",
            "Rotating pots every week or so keeps plants from leaning toward the light.",
        ),
    ),
    DistractorTopic(
        name="tech_support",
        exchanges=(
            (
                "My laptop has become really slow. What should I try first?",
                "Check which programs start automatically and disable the ones you don't need, look at "
                "available disk space, and install pending system updates. A browser with dozens of open "
                "tabs "
                "is often the real culprit.",
            ),
            (
                "How do I back up my photos properly?",
                "Follow the three-two-one idea: three copies of your data, on two different kinds of "
                "storage, "
                "with one copy off-site. In practice that might be your computer, an external drive and an "
                "automatic cloud backup.",
            ),
            (
                "What's a good way to manage all my passwords?",
                "Use a password manager. It generates strong, unique passwords for each site and fills them "
                "in "
                "for you, so you only remember one master password. Turn on two-factor authentication for "
                "email and banking as well.",
            ),
            (
                "My Wi-Fi keeps dropping in the evenings. Any ideas?",
                "Evening drops are often congestion from neighbours' networks. Try a less crowded channel or "
                "the 5 GHz band, restart the router and update its firmware. An old router may simply need "
                "replacing.",
            ),
            (
                "My mom is thinking about {carrier}. How do I help her compare plans?",
                "Start from how she actually uses her phone: minutes, texts and data per month. Check "
                "coverage "
                "maps for her home and usual places, then compare the total yearly cost including fees "
                "rather "
                "than the headline price.",
            ),
        ),
        details=(
            "Restarting a device clears more problems than most people expect.",
            "Automatic updates close security holes before you even hear about them.",
            "A cheap surge protector can save expensive electronics.",
            "Writing down the exact error message makes searching for a fix much easier.",
            "Old chargers and cables are a common cause of slow or flaky charging.",
        ),
    ),
    DistractorTopic(
        name="road_trip",
        exchanges=(
            (
                "I'm borrowing a {car} for a road trip. Anything I should check before leaving?",
                "Check the tire pressure and tread, top up the fluids, make sure the lights and wipers work, "
                "and confirm the insurance covers you as a driver. Photograph the car before you leave so "
                "there's no confusion about existing scratches.",
            ),
            (
                "How should I plan a road trip so it doesn't feel rushed?",
                "Keep daily driving to around four or five hours, plan one flexible day for every few days "
                "on "
                "the road, and book the first and last nights in advance. Leave room for detours.",
            ),
            (
                "What snacks travel well on long drives?",
                "Nuts, cheese crackers, apples, grapes, cut vegetables and granola bars all hold up well. A "
                "small cooler makes a huge difference, and a refillable water bottle saves stops.",
            ),
            (
                "We're thinking of driving through {city}. Is it worth stopping for a night?",
                "If the drive that day is long, a night there breaks it up well. Look for a place with easy "
                "parking, take an evening walk through the centre, and get back on the road early the next "
                "morning.",
            ),
        ),
        details=(
            "Download offline maps before you lose signal in remote areas.",
            "Switching drivers every two hours keeps everyone alert.",
            "A paper list of emergency numbers helps if your phone dies.",
            "Fill up before the tank drops below a quarter in rural stretches.",
            "A playlist or audiobook agreed on in advance avoids a lot of arguments.",
        ),
    ),
    DistractorTopic(
        name="interview_prep",
        exchanges=(
            (
                "My cousin has an interview at {company} next week. How should she prepare?",
                "She should research what the company does and recent news about it, then map her experience "
                "to the job description with two or three concrete stories. Practising answers out loud and "
                "preparing a few thoughtful questions for them helps a lot.",
            ),
            (
                "How do you answer 'tell me about yourself' in an interview?",
                "Keep it to about two minutes: a quick summary of where you stand today, a couple of "
                "highlights "
                "that relate to the role, and why this job is the logical next step. It's a pitch, not a "
                "life "
                "story.",
            ),
            (
                "What's a good question to ask at the end of an interview?",
                "Ask something that shows you're thinking about the work, like what success looks like in "
                "the "
                "first six months, or what the team's biggest challenge is right now.",
            ),
        ),
        details=(
            "The STAR structure, situation, task, action and result, keeps stories focused.",
            "A short thank-you note after the interview is still appreciated.",
            "Testing the video setup the day before avoids last-minute stress.",
            "It's fine to pause and think before answering a hard question.",
        ),
    ),
    DistractorTopic(
        name="gifts",
        exchanges=(
            (
                "My sister just got into {hobby}. What's a good beginner gift?",
                "Something that makes the first few months easier is usually appreciated: a good beginner "
                "book, a quality version of one basic tool, or a voucher for a local class. Avoid expensive "
                "kits until she knows what she likes.",
            ),
            (
                "What's a thoughtful gift for a coworker who's leaving?",
                "A card signed by the team with specific memories goes a long way. Pair it with something "
                "small and useful for their next step, like a nice notebook or a plant for the new desk.",
            ),
            (
                "Any ideas for a housewarming gift?",
                "Consumables are safest: good coffee, fresh flowers or local treats. A simple plant or a "
                "nice set of kitchen towels also works, since neither needs to match the decor.",
            ),
            (
                "My friend {friend} moved to {city}. What could I send as a surprise?",
                "A care package with treats from your area is a sweet reminder of home. Add a handwritten "
                "note, "
                "a photo from a shared memory and something practical for the new place, like a candle or a "
                "nice mug.",
            ),
            (
                "My dad keeps talking about getting a {car}. Is a model car a silly gift?",
                "Not at all, especially with a card that jokes about it. A detailed scale model or a framed "
                "print of the car is a fun nod to something he is clearly excited about.",
            ),
        ),
        details=(
            "Experiences are often remembered longer than objects.",
            "A handwritten note makes even a small gift feel personal.",
            "Keeping a running list of things people mention wanting makes gift shopping easy.",
            "Wrapping in a reusable tote or tea towel doubles as part of the gift.",
        ),
    ),
    DistractorTopic(
        name="fitness",
        exchanges=(
            (
                "My friend {friend} keeps inviting me to a class at {gym}. Are group classes good for "
                "beginners?",
                "They can be great: an instructor sets the pace, and the group keeps you coming back. Tell "
                "the "
                "instructor you are new, stay at the back for the first few sessions, and modify any move "
                "that "
                "hurts.",
            ),
            (
                "How do I start running without getting injured?",
                "Begin with run-walk intervals, three times a week, and increase total time by no more than "
                "about ten percent a week. Good shoes and easy pace matter more than distance at first.",
            ),
            (
                "What are good stretches after sitting at a desk all day?",
                "Try a hip flexor lunge stretch, a doorway chest stretch, gentle neck rolls and a seated "
                "twist. Holding each for thirty seconds, twice, takes only a few minutes.",
            ),
        ),
        details=(
            "Sleep does more for recovery than any supplement.",
            "Consistency beats intensity when building a habit.",
            "Strength training twice a week supports almost every other activity.",
            "Drinking water through the day matters more than gulping it during a workout.",
        ),
    ),
)

_DESTINATIONS = _pool(
    "Lisbon, Kyoto, Reykjavik, Barcelona, Vancouver, Mexico City, Edinburgh, Seoul, Buenos Aires, Prague, "
    "Hanoi, Copenhagen, Cape Town, Istanbul"
)
_FRIEND_NAMES = (
    "Jess",
    "Tom",
    "Rachel",
    "Kevin",
    "Mia",
    "Luis",
    "Ben",
    "Sara",
    "Grace",
    "Omar",
    "Lucy",
    "Dev",
)
_DISHES = (
    "paella",
    "beef bourguignon",
    "homemade dumplings",
    "shakshuka",
    "risotto",
    "pad thai",
    "chicken tagine",
)
_LANGUAGES = ("Portuguese", "Japanese", "Italian", "German", "Dutch", "Greek", "Swahili")
# Distractor slots that may hold another domain's value, with a neutral fallback for when that
# domain is the tracked one (so a distractor never mentions a tracked value).
_CROSS_DOMAIN_SLOTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "city": ("home_city", ("Lisbon", "Seoul", "Prague", "Edinburgh")),
    "company": (
        "employer",
        ("Brightline Analytics", "Northwind Labs", "Kestrel Health", "Bluefin Logistics"),
    ),
    "car": ("car", ("minivan", "camper van", "hatchback")),
    "hobby": ("hobby", ("jigsaw puzzles", "crosswords", "origami")),
    "gym": ("gym", ("the community centre", "the park bootcamp")),
    "carrier": ("phone_plan", ("a prepaid plan", "a family plan")),
    "friend": ("partner_name", _FRIEND_NAMES),
}
_DETAIL_PROMPTS = (
    "Can you go into a bit more detail?",
    "What else should I keep in mind?",
    "Could you expand on that a little?",
    "Anything else worth knowing?",
    "That's useful. Can you give me a few more pointers?",
)


# --------------------------------------------------------------------------------------------
# Timeline planning
# --------------------------------------------------------------------------------------------


@dataclass
class _Event:
    """One change to the tracked fact, said in one session."""

    kind: str  # introduce | update | retract
    value: Any  # internal value (str, dollars, count, seconds) held after this event
    style: str  # explicit | implicit
    relative: bool = False  # said only as a change ("another one", "up $20,000")
    retracted_value: Any = None  # retract: the wrong value stated first, then corrected
    session_index: int = -1


def _sample_values(rng: random.Random, domain: FactDomain, subject: dict[str, Any], count: int) -> list[Any]:
    """`count` distinct values in timeline order (numbers drift the way the fact would)."""
    kind = domain.value_kind
    if kind == "pool":
        return rng.sample(domain.values, count)
    if kind == "count":
        values = [rng.randint(2, 4)]
        while len(values) < count:
            values.append(values[-1] + rng.choice((1, 1, 1, 2)))
        return values
    if kind == "race_time":  # personal bests only ever get faster
        span = subject["hi"] - subject["lo"]  # start in the slower half; MAX_UPDATES gains stay above lo
        values = [rng.randint(subject["lo"] + span // 2, subject["hi"])]
        while len(values) < count:
            values.append(values[-1] - rng.randint(max(2, span // 60), max(3, span // 12)))
        return values
    if kind == "money":
        low, high, step = subject["lo"], subject["hi"], subject["step"]
        values = [rng.randrange(low, high + 1, step)]
        while len(values) < count:
            candidates = [values[-1] + sign * steps * step for sign in (1, -1) for steps in range(2, 9)]
            candidates = [value for value in candidates if low <= value <= high and value not in values]
            values.append(rng.choice(candidates))
        return values
    raise ValueError(f"FactDomain.value_kind: unknown {kind!r} in domain {domain.name!r}")


def _wrong_value(
    rng: random.Random, domain: FactDomain, subject: dict[str, Any], correct: Any, used: set[Any]
) -> Any:
    """A plausible value that is never true in this episode (said, then corrected to `correct`)."""
    if domain.value_kind == "pool":
        return rng.choice([value for value in domain.values if value not in used])
    if domain.value_kind == "money":  # a misread figure near the right one
        offsets = [sign * k * subject["step"] for sign in (1, -1) for k in range(1, 6)]
        return rng.choice(
            [correct + offset for offset in offsets if correct + offset > 0 and correct + offset not in used]
        )
    if domain.value_kind == "race_time":  # a paused watch reads faster than the official time
        return rng.choice([correct - k for k in range(3, 45) if correct - k not in used])
    raise ValueError(f"domain {domain.name!r} has no retractions")


def _plan_events(
    rng: random.Random, config: GeneratorConfig, domain: FactDomain, subject: dict[str, Any], n_updates: int
) -> list[_Event]:
    """The introduction and each update: value held afterwards, wording style, relative or retracted."""
    retracts = [domain.allows_retraction and rng.random() < config.retraction_prob for _ in range(n_updates)]
    # Small pools (days of the week) cannot also hold every wrong value: keep the updates, drop corrections.
    while 1 + n_updates + sum(retracts) > domain.capacity:
        retracts[retracts.index(True)] = False
    values = _sample_values(rng, domain, subject, 1 + n_updates)
    used = set(values)
    events = []
    for index, value in enumerate(values):
        style = config.update_style
        if style == "mixed":
            style = rng.choice(("explicit", "implicit"))
        if index == 0:
            events.append(_Event("introduce", value, style))
        elif retracts[index - 1]:
            wrong = _wrong_value(rng, domain, subject, value, used)
            used.add(wrong)
            events.append(_Event("retract", value, style, retracted_value=wrong))
        else:
            going_up = domain.value_kind != "pool" and value > values[index - 1]
            relative = (
                style == "implicit"
                and domain.value_kind != "pool"
                and bool(domain.relative_up if going_up else domain.relative_down)
                and rng.random() < config.relative_wording_prob
            )
            events.append(_Event("update", value, style, relative=relative))
    return events


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


def _canonical(domain: FactDomain, value: Any) -> str:
    """The value as gold_text writes it."""
    if domain.value_kind == "money":
        return _money(value)
    if domain.value_kind == "race_time":
        return _race_time(value)
    return str(value)


def _variants(domain: FactDomain, value: Any) -> tuple[str, ...]:
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
    return _canonical(domain, value)


def _increment(subject: dict[str, Any], delta: int) -> str:
    if delta == 1:
        return f"another {subject['single']}"
    return f"{_number_word(delta)} more {subject['more_noun']}"


def _fill(template: str, slots: dict[str, Any]) -> str:
    text = template.format(**slots)
    return text[:1].upper() + text[1:]


# --------------------------------------------------------------------------------------------
# Session rendering
# --------------------------------------------------------------------------------------------


@dataclass
class _Exchange:
    user: str
    assistant: str
    user_has_answer: bool = False
    assistant_has_answer: bool = False


@dataclass
class _EventRendering:
    """How one event was said, for the episode metadata."""

    stated: bool  # the held value is written out (not only a relative change)
    user_sentence: str  # the user's sentence that carries the change


def _statement_slots(
    rng: random.Random, domain: FactDomain, subject: dict[str, Any], value: Any, old: Any
) -> dict[str, Any]:
    slots = {key: item for key, item in subject.items() if isinstance(item, str)}
    said = _say(rng, domain, value)
    slots.update(value=said, a_value=_with_article(said), wrong="")
    slots["old"] = _canonical(domain, old) if old is not None else ""
    if domain.value_kind == "count":
        slots["value_word"] = _number_word(value)
        slots["increment"] = _increment(subject, value - old if old is not None else 1)
    if old is not None and domain.value_kind == "money":
        slots["delta"] = _money(abs(value - old))
    if old is not None and domain.value_kind == "race_time":
        slots["delta"] = _duration_words(abs(value - old))
    return slots


def _statement_templates(domain: FactDomain, event: _Event, going_up: bool) -> tuple[str, ...]:
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
        return _fill(rng.choice(_ACKS_IMPLICIT), slots) if rng.random() < 0.6 else "", False
    pool = _ACKS_INTRO if kind == "introduce" else _ACKS_UPDATE + domain.acks
    return _fill(rng.choice(pool), slots), True


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
        (_fill(user, slots), _fill(reply, slots))
        for user, reply in rng.sample(domain.requests, len(domain.requests))
    ]
    topic = rng.choice(DISTRACTOR_TOPICS)
    topic_slots = _distractor_slots(rng, domain.name)
    other = [
        (_fill(user, topic_slots), _fill(reply, topic_slots))
        for user, reply in rng.sample(topic.exchanges, len(topic.exchanges))
    ]
    chosen = []
    for position in range(count):
        own_first = (position == fact_at and not fact_in_passing) or rng.random() < 0.5
        first, second = (own, other) if own_first else (other, own)
        source = first or second
        chosen.append(source.pop(0) if source else rng.choice(_CLOSERS))
    return chosen


def _event_exchanges(
    rng: random.Random,
    config: GeneratorConfig,
    domain: FactDomain,
    subject: dict[str, Any],
    event: _Event,
    old: Any,
) -> tuple[list[_Exchange], _EventRendering]:
    """The exchanges of a session in which the tracked fact is introduced, updated or corrected."""
    n_exchanges = rng.randint(*config.evidence_exchanges)
    retracting = event.kind == "retract"
    if retracting:
        n_exchanges = max(n_exchanges, 2)
    stated_value = event.retracted_value if retracting else event.value
    slots = _statement_slots(rng, domain, subject, stated_value, old)
    going_up = old is not None and stated_value > old
    template = rng.choice(_statement_templates(domain, event, going_up))
    sentence = _fill(template, slots)
    stated = "{value" in template or "{a_value}" in template
    if event.style == "explicit" and rng.random() < 0.6:
        fact_at = 0
    else:
        fact_at = rng.randrange(n_exchanges - (1 if retracting else 0))
    in_passing = event.style == "implicit" and rng.random() < 0.5
    requests = _evidence_requests(rng, domain, slots, n_exchanges, fact_at, in_passing)
    exchanges = [_Exchange(user, reply) for user, reply in requests]

    fact = exchanges[fact_at]
    if event.style == "implicit" and rng.random() < 0.4:
        fact.user = _join(fact.user, sentence)
    else:
        fact.user = _join(sentence, fact.user)
    fact.user_has_answer = True
    ack, ack_states_value = _ack(rng, domain, event.kind, event.style, slots)
    fact.assistant = _join(ack, fact.assistant)
    fact.assistant_has_answer = ack_states_value
    rendering = _EventRendering(stated=stated and not retracting, user_sentence=sentence)

    if retracting:
        correction_at = rng.randrange(fact_at + 1, n_exchanges)
        correction_slots = _statement_slots(rng, domain, subject, event.value, old)
        correction_slots["wrong"] = _canonical(domain, event.retracted_value)
        correction = _fill(rng.choice(_RETRACTIONS + domain.retractions), correction_slots)
        target = exchanges[correction_at]
        target.user = _join(correction, target.user)
        target.user_has_answer = True
        target.assistant = _join(_fill(rng.choice(_RETRACTION_ACKS), correction_slots), target.assistant)
        target.assistant_has_answer = True
        rendering = _EventRendering(stated=True, user_sentence=correction)
    return exchanges, rendering


def _distractor_slots(rng: random.Random, tracked_domain: str | None) -> dict[str, str]:
    """Fill-ins for distractor templates; other domains' values are fair game, the tracked one is not."""
    slots = {
        "destination": rng.choice(_DESTINATIONS),
        "dish": rng.choice(_DISHES),
        "language": rng.choice(_LANGUAGES),
    }
    for slot, (domain_name, fallback) in _CROSS_DOMAIN_SLOTS.items():
        pool = fallback if domain_name == tracked_domain else FACT_DOMAINS[domain_name].values
        if slot == "friend" and rng.random() < 0.7:  # friends are mostly not named like partners
            pool = _FRIEND_NAMES
        slots[slot] = rng.choice(pool)
    return slots


def _details_answer(rng: random.Random, details: Sequence[str], n_sentences: int) -> str:
    start = rng.randrange(len(details))
    picked = [details[(start + offset) % len(details)] for offset in range(n_sentences)]
    rng.shuffle(picked)
    return " ".join(picked)


def _distractor_exchanges(
    rng: random.Random,
    topic: DistractorTopic,
    n_exchanges: int,
    filler_chars: int,
    slots: dict[str, str],
) -> list[_Exchange]:
    chosen = rng.sample(topic.exchanges, min(n_exchanges, len(topic.exchanges)))
    exchanges = [_Exchange(_fill(user, slots), _fill(reply, slots)) for user, reply in chosen]
    while len(exchanges) < n_exchanges:
        exchanges.append(
            _Exchange(rng.choice(_DETAIL_PROMPTS), _details_answer(rng, topic.details, rng.randint(2, 3)))
        )
    total = sum(len(exchange.user) + len(exchange.assistant) for exchange in exchanges)
    while total < filler_chars:
        filler = _Exchange(
            rng.choice(_DETAIL_PROMPTS), _details_answer(rng, topic.details, len(topic.details))
        )
        exchanges.append(filler)
        total += len(filler.user) + len(filler.assistant)
    if rng.random() < 0.3:
        exchanges.append(_Exchange(*rng.choice(_CLOSERS)))
    return exchanges


def _turns(exchanges: Sequence[_Exchange]) -> tuple[Turn, ...]:
    turns: list[Turn] = []
    for exchange in exchanges:
        turns.append(Turn("user", exchange.user, exchange.user_has_answer))
        turns.append(Turn("assistant", exchange.assistant, exchange.assistant_has_answer))
    return tuple(turns)


def _pick_topics(rng: random.Random, count: int) -> list[DistractorTopic]:
    """Distractor topics with no topic twice in a row."""
    topics: list[DistractorTopic] = []
    for _ in range(count):
        options = [topic for topic in DISTRACTOR_TOPICS if not topics or topic is not topics[-1]]
        topics.append(rng.choice(options))
    return topics


# --------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------


def format_date(moment: datetime) -> str:
    """LongMemEval's date form, e.g. '2023/05/30 (Tue) 23:40' (locale-independent)."""
    return f"{moment:%Y/%m/%d} ({_WEEKDAYS[moment.weekday()]}) {moment:%H:%M}"


def parse_date(text: str) -> datetime:
    """Inverse of `format_date`; the weekday in parentheses is ignored."""
    match = re.fullmatch(r"(\d{4}/\d{2}/\d{2}) \(\w{3}\) (\d{2}:\d{2})", text.strip())
    if not match:
        raise ValueError(f"date {text!r}: expected the form '2023/05/30 (Tue) 23:40'")
    return datetime.strptime(f"{match[1]} {match[2]}", "%Y/%m/%d %H:%M")


def _session_dates(
    rng: random.Random, config: GeneratorConfig, count: int
) -> tuple[list[datetime], datetime]:
    """Strictly increasing session dates (at least a day apart, waking hours), then the question's."""

    def at_random_time(day: datetime) -> datetime:
        return day.replace(hour=rng.randint(7, 23), minute=rng.randint(0, 59))

    day = datetime(2023, rng.randint(1, 6), rng.randint(1, 28))
    dates = []
    for _ in range(count):
        dates.append(at_random_time(day))
        day += timedelta(days=rng.randint(*config.days_between_sessions))
    question_date = at_random_time(dates[-1] + timedelta(days=rng.randint(1, 30)))
    return dates, question_date


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _pick_domain(rng: random.Random, config: GeneratorConfig) -> FactDomain:
    names = list(config.domains or FACT_DOMAINS)
    weights = [config.counts_weight if name == "counts" else 1.0 for name in names]
    return FACT_DOMAINS[rng.choices(names, weights=weights)[0]]


def _render_sessions(
    rng: random.Random,
    config: GeneratorConfig,
    domain: FactDomain,
    subject: dict[str, Any],
    events: list[_Event],
    n_sessions: int,
    episode_id: str,
) -> tuple[list[Session], list[_EventRendering], str]:
    """Place the events among distractor sessions and write every session out (+ the question date)."""
    trailing = min(rng.randint(*config.trailing_distractors), n_sessions - len(events))
    positions = sorted(rng.sample(range(n_sessions - trailing), len(events)))
    for event, position in zip(events, positions, strict=True):
        event.session_index = position
    event_at = {event.session_index: index for index, event in enumerate(events)}

    dates, question_date = _session_dates(rng, config, n_sessions)
    topics = iter(_pick_topics(rng, n_sessions - len(events)))
    sessions: list[Session] = []
    renderings: dict[int, _EventRendering] = {}
    for session_index in range(n_sessions):
        if session_index in event_at:
            index = event_at[session_index]
            old = events[index - 1].value if index else None
            exchanges, renderings[index] = _event_exchanges(rng, config, domain, subject, events[index], old)
        else:
            n_exchanges = rng.randint(*config.distractor_exchanges)
            slots = _distractor_slots(rng, domain.name)
            exchanges = _distractor_exchanges(rng, next(topics), n_exchanges, config.filler_chars, slots)
        session_id = f"{episode_id}-s{session_index:02d}"
        sessions.append(Session(session_id, format_date(dates[session_index]), _turns(exchanges)))
    return sessions, [renderings[index] for index in range(len(events))], format_date(question_date)


def _timeline_entries(
    domain: FactDomain, events: list[_Event], renderings: list[_EventRendering]
) -> list[dict[str, Any]]:
    """metadata["value_timeline"]: one JSON-able entry per event, in session order."""
    timeline = []
    for index, (event, rendering) in enumerate(zip(events, renderings, strict=True)):
        entry: dict[str, Any] = {
            "session_index": event.session_index,
            "value": _canonical(domain, event.value),
            "variants": list(_variants(domain, event.value)),
            "kind": event.kind,
            "style": event.style,
            "relative": event.relative,
            "stated": rendering.stated,
            "user_sentence": rendering.user_sentence,
        }
        if domain.value_kind == "count" and index:
            entry["delta"] = event.value - events[index - 1].value
        if event.retracted_value is not None:
            entry["retracted_value"] = _canonical(domain, event.retracted_value)
            entry["retracted_variants"] = list(_variants(domain, event.retracted_value))
        timeline.append(entry)
    return timeline


def generate_episode(seed: int, config: GeneratorConfig | str = "medium") -> Episode:
    """One synthetic knowledge-update episode; the same (seed, config) always gives the same episode."""
    config = _resolve_config(config)
    rng = random.Random(seed)
    episode_id = f"syn-{config.name}-{seed}"
    n_sessions = rng.randint(*config.n_sessions)
    n_updates = rng.randint(*config.n_updates)
    domain = _pick_domain(rng, config)
    subject = rng.choice(domain.subjects)
    subject_words = {key: item for key, item in subject.items() if isinstance(item, str)}
    events = _plan_events(rng, config, domain, subject, n_updates)
    sessions, renderings, question_date = _render_sessions(
        rng, config, domain, subject, events, n_sessions, episode_id
    )

    held = [event.value for event in events]  # the value after each event
    asked = "current"
    if n_updates and domain.previous_questions and rng.random() < config.previous_value_prob:
        asked = rng.choice(("previous", "initial"))
    asked_value = {"current": held[-1], "previous": held[-2] if n_updates else None, "initial": held[0]}[
        asked
    ]
    question_pool = {
        "current": domain.questions,
        "previous": domain.previous_questions,
        "initial": domain.initial_questions or domain.previous_questions,
    }[asked]
    question = _fill(rng.choice(question_pool), subject_words)

    stale = [value for value in held if value != asked_value]
    stale += [event.retracted_value for event in events if event.retracted_value is not None]
    superseded = tuple(dict.fromkeys(form for value in stale for form in _variants(domain, value)))
    metadata = {
        "generator": "supersede_lib.data.synthetic",
        "seed": seed,
        "difficulty": config.name,
        "domain": domain.name,
        "subject": subject_words,
        "update_style": config.update_style,
        "n_updates": n_updates,
        "n_distractor_sessions": n_sessions - len(events),
        "asked": asked,
        "value_timeline": _timeline_entries(domain, events, renderings),
        "mention_sessions": [index for index, session in enumerate(sessions) if session.is_evidence],
        "distractor_exchanges": list(config.distractor_exchanges),
        "filler_chars": config.filler_chars,
    }
    return Episode(
        episode_id=episode_id,
        sessions=tuple(sessions),
        question=question,
        question_date=question_date,
        gold_answers=_variants(domain, asked_value),
        superseded_values=superseded,
        asks_previous_value=asked != "current",
        source=f"synthetic:{config.name}",
        question_type="knowledge-update",
        gold_text=_canonical(domain, asked_value),
        metadata=metadata,
    )


def episode_seed(seed: int, index: int) -> int:
    """The seed of episode `index` in `generate_episodes(..., seed=seed)` (disjoint across base seeds)."""
    if seed < 0 or not 0 <= index < EPISODE_SEED_STRIDE:
        raise ValueError(
            f"need seed >= 0 and 0 <= index < {EPISODE_SEED_STRIDE}, got seed={seed}, index={index}"
        )
    return seed * EPISODE_SEED_STRIDE + index


def generate_episodes(n: int, seed: int = 0, difficulty: str = "medium", **overrides: Any) -> list[Episode]:
    """`n` episodes of a difficulty preset; `overrides` replace GeneratorConfig fields.

    Episode i uses `episode_seed(seed, i)`, so `generate_episode(episode_seed(seed, i), config)`
    rebuilds it alone, and sets from different base seeds never share an episode.
    """
    if n < 0:
        raise ValueError(f"generate_episodes: n must be >= 0, got {n}")
    config = config_for_difficulty(difficulty)
    known = {item.name for item in fields(GeneratorConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(
            f"generate_episodes: unknown GeneratorConfig field(s) {unknown}; known: {sorted(known)}"
        )
    if overrides:
        config = replace(config, **overrides)
    return [generate_episode(episode_seed(seed, index), config) for index in range(n)]


def add_distractor_sessions(episode: Episode, count: int, *, seed: int | None = None) -> Episode:
    """The same episode with `count` more distractor sessions spread through its history.

    For the scale study: the tracked fact, its sessions and the question stay as they were; new
    sessions get dates strictly between their neighbours and never mention the tracked domain's
    values. Metadata session indices (value_timeline, mention_sessions) are shifted to match.
    The result is a different episode, so its id gets a "+x{count}" suffix; metadata
    "base_episode_id" keeps the original id for pairing short and long runs. Works on any
    Episode; only synthetic ones name the tracked domain that new sessions must avoid.
    """
    if count < 0:
        raise ValueError(f"add_distractor_sessions: count must be >= 0, got {count}")
    if count == 0:
        return episode
    rng = random.Random(f"{episode.episode_id}:{count}" if seed is None else seed)
    metadata = dict(episode.metadata)
    tracked = metadata.get("domain")
    exchanges_range = tuple(metadata.get("distractor_exchanges", (2, 3)))
    filler_chars = int(metadata.get("filler_chars", 0))
    dates = [parse_date(session.date) for session in episode.sessions] + [parse_date(episode.question_date)]
    # Gap g sits just before original session g (g == len(sessions): before the question).
    gaps = sorted(rng.choices(range(len(episode.sessions) + 1), k=count))
    new_sessions: list[Session] = []
    index_map: dict[int, int] = {}
    for original_index in range(len(episode.sessions) + 1):
        inserted = [gap for gap in gaps if gap == original_index]
        if inserted:
            end = dates[original_index]
            start = dates[original_index - 1] if original_index else end - timedelta(days=7 * len(inserted))
            span = (end - start) / (len(inserted) + 1)
            if span < timedelta(minutes=1):
                raise ValueError(
                    f"episode {episode.episode_id}: sessions {original_index - 1} and {original_index} "
                    "are too close in time to insert distractor sessions between them"
                )
            for offset, topic in enumerate(_pick_topics(rng, len(inserted)), start=1):
                moment = (start + span * offset).replace(second=0, microsecond=0)
                exchanges = _distractor_exchanges(
                    rng, topic, rng.randint(*exchanges_range), filler_chars, _distractor_slots(rng, tracked)
                )
                new_sessions.append(
                    Session(
                        session_id=f"{episode.episode_id}-x{len(new_sessions):02d}",
                        date=format_date(moment),
                        turns=_turns(exchanges),
                    )
                )
        if original_index < len(episode.sessions):
            index_map[original_index] = len(new_sessions)
            new_sessions.append(episode.sessions[original_index])
    if "value_timeline" in metadata:
        metadata["value_timeline"] = [
            {**entry, "session_index": index_map[entry["session_index"]]}
            for entry in metadata["value_timeline"]
        ]
    if "mention_sessions" in metadata:
        metadata["mention_sessions"] = [index_map[index] for index in metadata["mention_sessions"]]
    if "n_distractor_sessions" in metadata:
        metadata["n_distractor_sessions"] = metadata["n_distractor_sessions"] + count
    metadata["extra_distractor_sessions"] = metadata.get("extra_distractor_sessions", 0) + count
    metadata.setdefault("base_episode_id", episode.episode_id)
    return replace(
        episode, episode_id=f"{episode.episode_id}+x{count}", sessions=tuple(new_sessions), metadata=metadata
    )


__all__ = [
    "DIFFICULTY_LADDER",
    "DISTRACTOR_TOPICS",
    "EXPLICIT_MARKERS",
    "EXPLICIT_TEMPLATED",
    "FACT_DOMAINS",
    "UPDATE_STYLES",
    "DistractorTopic",
    "FactDomain",
    "GeneratorConfig",
    "add_distractor_sessions",
    "config_for_difficulty",
    "describe_config",
    "episode_seed",
    "format_date",
    "generate_episode",
    "generate_episodes",
    "next_difficulty",
    "parse_date",
]
