"""The matcher's word tables: the vocabulary its rules read, apart from the rules themselves.

Two kinds. `text` and `numbers` spell values canonically with the number words, ordinals, short
forms (weekdays, months, brands), articles, currency words and stopwords. The rules (`mentions`,
`hedges`, `abstention`, `attribution`, ...) decide what a mention means with the markers: negations and doubts, past and forward framing ("used to",
"now"), numeric qualifiers ("over", "or more"), hedges and guesses, and the phrasings of "I don't
know" (`UNKNOWN`). A rule change that only needs a new word is an edit here; tests/test_matcher*.py
hold the answers each word was added for.
"""

from __future__ import annotations

import re

ARTICLES = frozenset({"a", "an", "the"})
CURRENCY_WORDS = frozenset({"dollar", "dollars", "usd", "buck", "bucks", "euro", "euros", "eur"})
UNITS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
TENS = {
    word: 10 * (index + 2)
    for index, word in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
}
ORDINALS = {
    word: value
    for value, word in enumerate(
        "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
        "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth".split()
    )
} | {
    word: 10 * (index + 2)
    for index, word in enumerate(
        "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth".split()
    )
}
LARGE_SCALES = {"thousand": 1000, "million": 10**6, "billion": 10**9}
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)
SHORT_FORMS = {
    "mon": "monday",
    "tue": "tuesday",
    "tues": "tuesday",
    "wed": "wednesday",
    "thu": "thursday",
    "thur": "thursday",
    "thurs": "thursday",
    "fri": "friday",
    "sat": "saturday",
    "sun": "sunday",
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
    "chevy": "chevrolet",
    "vw": "volkswagen",
}
SHORT_FORMS_NEEDING_CAPITAL = frozenset({"mon", "wed", "sat", "sun", "jan", "mar"})  # also plain words

STOPWORDS = frozenset(
    """
    i me my mine myself you your yours yourself we our ours us he him his she her hers it its they
    them their theirs this that these those is am are was were be been being have has had having do
    does did doing will would shall should can could may might must to of in on at for with by from
    about as into onto over under up down out off than then so and or but if because while also just
    very too still now currently current there here what which who whom whose when where why how all
    any some such only own same other each both few more most im ive youve youre youd id theyre
    thats whats theres lets maybe perhaps possibly probably likely either think guess believe seems
    seem sorry please unfortunately well yes okay ok according based notes note answer
    """.split()
)

INTERROGATIVES = frozenset(
    "did do does is are was were am have has had can could would will should shall may might must "
    "what where which who whom whose when why how isnt arent wasnt werent dont doesnt didnt".split()
)

MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def phrases(alternatives: str) -> tuple[tuple[str, ...], ...]:
    """'no longer|not' -> (("no", "longer"), ("not",)): multi-word markers as token tuples."""
    return tuple(tuple(phrase.split()) for phrase in alternatives.split("|"))


NEGATIONS = phrases(
    "not|never|isnt|wasnt|arent|werent|dont|doesnt|didnt|havent|hasnt|nor|neither|no longer|rather than|"
    "instead of"
)
NEGATION_IDIOM_NEXT = frozenset({"sure", "certain", "only", "just", "know", "remember", "recall"})
DENIAL_FRAMES = phrases(
    "not case that|not true that|not correct that|not right that|not so that|isnt case that|isnt true that|"
    "false that|untrue that|incorrect that|wrong that|dont think|do not think|dont believe|do not believe|"
    "wouldnt say|would not say|no longer case that|no longer true that"
)
"""A frame that denies the whole clause after it ("It is not the case that you live in Denver")."""
_RECALLING = [
    f"{no} {verb}"
    for no in ("dont", "do not", "cant", "cannot", "can not")
    for verb in ("recall", "remember")
]
_TELLING = ("mentioning", "saying", "telling me about", "talking about", "bringing up", "anything about")
NOT_MENTIONED_FRAMES = phrases(
    "|".join(f"{recall}{who} {act}" for recall in _RECALLING for who in ("", " you") for act in _TELLING)
    + "|no record of|no mention of|no information about|no information on|no info about|no info on|"
    "no memory of|no note of|no notes about|no notes on|nothing about|not aware of|unaware of|no idea about|"
    "never mentioned|never said|never told me|never talked about|never brought up|didnt mention|"
    "did not mention|havent mentioned|have not mentioned|didnt tell me|did not tell me|havent told me|"
    "have not told me|didnt say anything about|did not say anything about"
)
"""A frame that says what follows in its clause never came up ("I don't recall you mentioning Planet
Fitness", "There's no record of Planet Fitness"): naming a value only to say so conveys nothing. Only
frames about being told: "I don't remember the day you switched to Planet Fitness" keeps the value."""
NOT_MENTIONED_AFTER = phrases(
    "never came up|never come up|did not come up|never got mentioned|was never mentioned|"
    "has never been mentioned|never was mentioned|was not mentioned|has not been mentioned|has not come up"
)
"""Right after a value, in its clause: the value never came up ("Planet Fitness never came up")."""
RETRACTIONS = phrases(
    "scratch that|no wait|wait no|i was wrong|i am wrong|that wrong|that is wrong|that not right|"
    "that is not right|that incorrect|that is incorrect|i take that back|never mind|on second thought"
)
"""A sentence that takes back the value named just before it ("Planet Fitness. Scratch that.")."""
DOUBTS = phrases("doubt|doubtful|unlikely|hardly|anything but|everything but|all but|except|other than")
PAST_BEFORE = phrases(
    "previously|formerly|originally|initially|earlier|after|from|old|former|previous|prior|used to|ex|"
    "free of|left|quit|dropped|cancelled|canceled|got rid of|ditched|gave up|gave up on|sold|traded in|"
    "stopped going to|moved away from|switched away from|moved on from|broke up with|split from|"
    "split with|done at|done with|leaving|away from|before that|before this|before then|prior to that|"
    "once|at one time|back then|in past|once upon time"
)
PAST_FRAMES = phrases("back then|in past|at one time|once upon time|years ago|long ago|in those days")
"""A frame that puts the whole clause after it in the past ("Back then you lived in Denver")."""
PAST_AFTER = phrases(
    "previously|formerly|originally|initially|earlier|before|anymore|later|then|until|at 1st|no longer|"
    "back then|in past|at one time|"
    "previous|former|old"
)
ENDINGS = phrases("is over|are over|was over|were over|has ended|have ended|had ended")
"""Said after a value, at its clause's end, these end it: "things with Theo are over";
"Amara is over the moon" goes on, and ends nothing."""
PAST_AFTER_ACROSS_CLAUSES = frozenset({("then",), ("later",)})  # "Tom, then Sarah"; not "Denver (previously
# Austin)" or "Denver, and before that Austin", where the marker labels what follows it
FORWARD_BEFORE = phrases(
    "now|currently|today|nowadays|these days|latest|newest|new|current|present|presently|before|"
    "moved to|moving to|move to|switched to|switching to|switch to|changed to|changing to|relocated to|"
    "relocating to|upgraded to|became|later|then|after that|since then"
)
FORWARD_AFTER = phrases("now|currently|today|nowadays|these days")
CURRENT_DATE_FRAMES = phrases(
    "current date and time is|current date is|current date|current time is|today date is|date today is|today is"
)  # "The current date is 2023/05/26 (Fri) 17:20, and ...": the answer notes when it is asked
DATE_STATEMENT_LINKS = frozenset({"at", "of", "on", "am", "pm", "utc"})  # "Monday, May 8, 2023 at 1:01 pm"
MARKER_NEXT_EXCEPTIONS = {
    ("left",): frozenset({"for", "to", "over", "with", "at", "in", "on"}),  # "left for Denver" is arriving
    ("dropped",): frozenset({"by", "off", "to", "in", "into"}),
    ("sold",): frozenset({"on"}),
    ("after",): frozenset({"that", "this", "then", "which"}),  # "after that, Denver": Denver is the later
    ("before",): frozenset({"that", "this", "then", "which"}),  # "before that, Austin": Austin is earlier
    ("once",): frozenset(
        {"again", "more", "every", "per", "in", "week", "month", "day", "year"}
    ),  # "once a week"
}
PAST_SCAN_BOUNDARIES = frozenset({"to", "into", "for", "favor", "favour"})  # "from Austin to Denver"
NUMERIC_QUALIFIERS = phrases(
    "over|above|under|below|nearly|almost|beyond|exceeding|more than|less than|fewer than|greater than|"
    "higher than|lower than|at least|at most|by"
)
NUMERIC_QUALIFIERS_AFTER = phrases(
    "or more|or less|or fewer|or higher|or lower|or above|or below|or over|or under|plus|and up|"
    "and above|and over|at least|at most"
)
AUXILIARIES = frozenset(
    "is am are was were be been has have had do does did will would seems seem sounds looks".split()
)
PREDICATE_DENIALS = frozenset(
    "not never isnt wasnt arent werent doesnt didnt dont hasnt havent wont cant couldnt shouldnt "
    "wrong incorrect false mistaken unlikely doubtful unrelated irrelevant nothing".split()
)
CONTRACTED_DENIALS = frozenset("isnt wasnt arent werent doesnt didnt hasnt havent wont".split())
RANGE_WORDS = frozenset({"to", "through", "thru", "till", "until"})
"""Between two numbers they make a range ("3 to 4"), which is not one number; so does a hyphen ("3-4")."""
REGION_WORDS = frozenset(
    """
    alabama alaska arizona arkansas california colorado connecticut delaware florida georgia hawaii
    idaho illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan
    minnesota mississippi missouri montana nebraska nevada hampshire jersey mexico york carolina dakota
    ohio oklahoma oregon pennsylvania rhode island tennessee texas utah vermont virginia washington
    wisconsin wyoming dc north south east west new
    al ak az ar ca co ct de fl ga hi ia id il in ks ky la ma md me mi mn mo ms mt nc nd ne nh nj nm nv
    ny oh ok or pa ri sc sd tn tx ut va vt wa wi wv wy
    usa us america uk england scotland wales ireland britain canada ontario quebec alberta columbia
    manitoba nova scotia australia zealand germany france spain italy portugal netherlands belgium
    switzerland austria sweden norway denmark finland poland greece japan china india korea brazil
    argentina chile peru colombia philippines singapore vietnam thailand indonesia egypt kenya nigeria
    province state county
    inc llc ltd corp co company md phd jr sr
    """.split()
)
"""Words that refine a value after a comma rather than rival it: "Denver, Colorado", "Acme, Inc."."""
CLAUSE_WORDS = frozenset({"but", "however", "though", "although", "now", "currently", "actually", "today"})
LIST_SEPARATORS = frozenset({"or", "and", "nor", "versus", "vs"})
GUESS_WORDS = frozenset(
    "maybe perhaps possibly probably could might also alternatively otherwise else either or".split()
)
HEDGE_WORDS = GUESS_WORDS | frozenset(
    "likely and may be is was would say guess think i another option possibility possible plausible "
    "alternative too candidate chance".split()
)
GUESS_MARKERS = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|likely|my guess|i guess|best guess|might be|could be|"
    r"i think it|i believe it|i would say|id say|if i had to)\b"
)
REFERENCE_WORDS = frozenset(
    "mentioned mention told said shared discussed talked recorded record records noted notes note "
    "conversation conversations information info details history memory".split()
)
OFFER_OPENINGS = phrases(
    "if you|let me know|feel free|please|could you|can you|would you|i can|i would be happy"
)

SPEAKER_LABEL = re.compile(r"(?im)^[ \t]*(?:user|assistant|system|human|ai)[ \t]*:[ \t]*")
"""A chat speaker label at a line start ("User:", "assistant:"): a small model echoing a transcript."""
ADVICE_WORDS = frozenset(
    "consider considering recommend recommended recommendation suggest suggested suggestion try trying".split()
)
"""An item that gives advice ("you might want to consider a hybrid") offers no answer about the user."""

UNKNOWN = re.compile(
    "|".join(
        [
            r"\b(?:dont|do not|didnt|did not|cant|cannot|can not|couldnt|could not|unable to|not able to|"
            r"no way to|no way of) (?:know|knowing|tell|telling|say|determine|find|recall|remember|answer|"
            r"confirm|be sure|be certain|see)\b",
            r"\b(?:havent|have not|hasnt|has not|didnt|did not|never) (?:yet |actually |explicitly |"
            r"specifically |ever )?(?:mentioned|mention|told|tell|said|say|shared|share|specified|specify|"
            r"provided|provide|stated|state|discussed|discuss|given|noted|talked|brought up)\b",
            r"\b(?:not|never|wasnt|isnt) (?:been |yet )?(?:mentioned|specified|provided|available|recorded|"
            r"stated|known|given|included|listed|noted|shared|documented|clear)\b",
            r"\bno (?:information|info|record|records|mention|details|data|indication|evidence|knowledge|"
            r"notes)\b",
            r"\b(?:dont|do not|doesnt|does not|didnt|did not) (?:have|contain|include|hold)(?: \w+){0,3} "
            r"(?:information|info|details?|records?|data|knowledge|notes?)\b",
            r"\bnotes? (?:dont|do not|doesnt|does not|didnt|did not) (?:have|contain|include|hold|mention|"
            r"say|specify|show|record|list|cover)\b",
            r"\b(?:unknown|unclear|not sure|uncertain|no idea|not enough|insufficient|cannot be determined|"
            r"cant be determined)\b",
            r"\bnot (?:in|part of) (?:my |your |our )?(?:notes|memory|records|conversation|conversations)\b",
            r"\bnothing (?:about|on|regarding|in)\b",
            r"\bbut not (?:where|what|which|when|who|whom|how|why|whether|if|your|any|its|their)\b",
        ]
    )
)

USER_WORDS = frozenset("i me my mine myself you your yours yourself im ive youre youve youd we our".split())
"""Words that put the user in a clause: a value said with them is said of the user."""
COPULAS = frozenset("is am are was were".split())
"""The verb that splits a clause into whose thing (the subject) and what it is (the predicate)."""
ROLE_NOUNS = frozenset(
    """
    friend colleague coworker boss manager supervisor trainer teacher coach instructor tutor mentor
    neighbor neighbour roommate flatmate landlord landlady doctor dentist therapist sister brother
    mother father mom dad mum parent wife husband spouse partner girlfriend boyfriend fiance fiancee
    cousin aunt uncle niece nephew son daughter grandmother grandfather grandma grandpa classmate
    teammate client
    """.split()
)
"""People named by their role ("the trainer", "the violin teacher"): another person than the user."""
INDEFINITES = frozenset(
    "everything nothing something anything everyone someone anyone nobody everybody somebody".split()
)
"""Subjects that name no one in particular: "Everything is pointing to Denver" gives Denver to no one."""
CLAUSE_JOINERS = frozenset("and or but so while whereas because although though however".split())
"""Words that start a new clause: what a clause says of whom ends there."""
NAME_WORDS = frozenset({"name", "names"})
"""What a person is called: "the partner's name is Kenji" names the partner, as "the partner is Kenji"."""
KIND_WORDS = frozenset(
    """
    place city town area neighbourhood neighborhood location home address
    pet animal
    company employer workplace job work office title role position
    car vehicle gym membership carrier provider network phone mobile plan
    hobby activity pastime budget amount time record best pr day schedule partner
    """.split()
)  # words naming the kind of a personal fact: a notes key made of them labels its value
