"""The programmatic matcher and the supersession reward (paper Section 3, "Reward").

The paper grades answers without a judge model: `r_cur = 1[the answer conveys the current value]`,
`r_stale = -1[the answer asserts a superseded value]` (inert when no superseded values are known),
and `reward = r_cur + lambda * r_stale`. Because the same matcher is the GRPO training signal it has
to be hard to game, so every rule that withholds credit is spelled out next to its code.

The face, used by the runner, the environment and the trainer alike:

- `score_episode_answer(episode, answer)`: the verdict and reward of one answer to one episode.
- `score_answer(answer, gold_answers, superseded_values, ...)`: the same from the values alone.
- `conveys_value(text, value)`: does the text mention the value as a value (not negated, not
  qualified)? Used for answers and for "do the notes still hold it".
- `says_unknown(text)`: does the text say the information is not available?

A mention of a value is one of:

- denied: "not Denver", "no longer in Denver", "I doubt it's Denver", "anything but Denver",
  "Denver is wrong", "Denver was never mentioned"; for numbers also qualified ("over 25", "5 or
  more") or a change rather than a level ("raised by $41,500"). Denied mentions convey nothing.
- asked: in a sentence that ends with a question mark ("Did you move to Denver?"): asserts nothing.
- context: framed as another time than the one asked about. For a question about the current value,
  past framing ("you used to live in Denver", "moved from Detroit", "finally free of T-Mobile",
  "Tom, then Sarah", "things with Theo are over"); for a question about an earlier value
  (`asks_previous_value`), forward framing ("before I moved to Minneapolis", "now $400,000"). Context
  mentions are history, not the answer.
- asserted: anything else.

An asserted gold still earns nothing when the answer names it without answering with it
(`coherence`): it also denies or takes back the same value ("Planet Fitness. Scratch that."), or makes
it the value of a thing it owns itself ("Ingrid's girlfriend is Ingrid"). Naming it only to say it never
came up ("I don't recall you mentioning Planet Fitness") is a denied mention.

A line keyed to another thing (the rule decided once for answers and notes; labelling README): a
`key: value` line gives its value to its key. A key naming another thing the sessions talk about
(`owners`, `sessions`: "laptop: Planet Fitness" when the user also talked about a laptop) takes the
value away from the user; a key the conversation never uses (the prompt example's `violin teacher:`,
copied) is read as noise and the line by its value, its literal reading reported beside the results
(`strict_label`; `memory_metrics.holds_current_keyed` for notes).

Where each rule lives, bottom first: `words` (the vocabulary the rules read), `numbers` and `text`
(tokens in one canonical spelling, with the punctuation between them), `stems` (plurals, activities,
runs of tokens), `mentions` (denied and context mentions), `dates` (dates, time stamps and statements
of the current date), `segments` (list items), `values` (where a value is mentioned), `attribution`,
`sessions` and `owners` (whose value a mention gives), `candidates` and `hedges` (an answer that
spreads its bet), `coherence` (an answer that takes the gold back or garbles its owner),
`short_forms` ("Honda" for "Honda CR-V"), `abstention` ("I don't know"), and `scoring` (the verdict
and reward).
"""

from supersede_lib.eval.matcher.abstention import says_unknown
from supersede_lib.eval.matcher.scoring import (
    MATCHER_VERSION,
    MAX_ANSWER_CHARS,
    Score,
    Verdict,
    score_answer,
    score_episode_answer,
)
from supersede_lib.eval.matcher.sessions import other_turn_topics
from supersede_lib.eval.matcher.stems import content_stems
from supersede_lib.eval.matcher.text import analyse, normalize
from supersede_lib.eval.matcher.values import conveys_value

__all__ = [
    "MATCHER_VERSION",
    "MAX_ANSWER_CHARS",
    "Score",
    "Verdict",
    "analyse",
    "content_stems",
    "conveys_value",
    "normalize",
    "other_turn_topics",
    "says_unknown",
    "score_answer",
    "score_episode_answer",
]
