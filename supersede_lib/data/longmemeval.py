"""LongMemEval as Episodes: find the file (local copy or hub cache), validate it, convert it.

Every record is checked field by field, so a malformed file fails loudly with the file, record
index, question_id and field instead of producing a silently wrong study. Sessions are re-ordered
by date (the oracle file is not in time order) because the bounded-memory agent sees them one at a
time. Nothing here fixes upstream labels; disagreements are reported, not patched.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, overload

import pandas as pd
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import HFValidationError, HTTPError

from supersede_lib.agent.episode import Episode, Session, Turn

__all__ = [
    "DEFAULT_REPO_ID",
    "ORIGINAL_REPO_ID",
    "QUESTION_TYPES",
    "DataUnavailableError",
    "Episode",
    "LongMemEvalFormatError",
    "NoQuestionsError",
    "Session",
    "Turn",
    "dataset_statistics",
    "episodes_from_records",
    "gold_answer_variants",
    "is_previous_value_question",
    "load_longmemeval",
    "longmemeval_file",
    "parse_longmemeval_date",
    "read_longmemeval_records",
    "summarize_statistics",
]

DEFAULT_REPO_ID = "xiaowu0162/longmemeval-cleaned"  # the Sept 2025 cleaned re-release
ORIGINAL_REPO_ID = "xiaowu0162/longmemeval"
LOCAL_DIR_ENV = "SUPERSEDE_LONGMEMEVAL_DIR"
DEFAULT_CACHE_DIR = Path(__file__).resolve().parents[2] / "data" / "longmemeval"

CLEANED_FILENAMES = {
    "oracle": "longmemeval_oracle.json",
    "s": "longmemeval_s_cleaned.json",
    "m": "longmemeval_m_cleaned.json",
}
ORIGINAL_FILENAMES = {
    "oracle": "longmemeval_oracle.json",
    "s": "longmemeval_s.json",
    "m": "longmemeval_m.json",
}
SPLITS = tuple(CLEANED_FILENAMES)

REQUIRED_FIELDS = (
    "question_id",
    "question_type",
    "question",
    "answer",
    "question_date",
    "haystack_dates",
    "haystack_session_ids",
    "haystack_sessions",
    "answer_session_ids",
)
ROLES = ("user", "assistant")
QUESTION_TYPES = (  # the six LongMemEval question types
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
APPROX_CHARS_PER_TOKEN = 4
# Size limits a record must keep, so a damaged or hostile file is refused before it costs a call. The
# longest LongMemEval turns run to a few thousand characters and the `m` split's histories to about 1.5
# million tokens (~6 million characters): both limits leave room for the real data several times over.
MAX_TEXT_CHARS = 200_000  # one text field (a turn's content, the question, the answer): ~50k tokens
MAX_RECORD_CHARS = 20_000_000  # all the text of one record together


class LongMemEvalFormatError(ValueError):
    """A LongMemEval file or record does not have the upstream layout."""


class NoQuestionsError(ValueError):
    """A file holds no question of the type asked for: a study on it would measure nothing."""


class DataUnavailableError(RuntimeError):
    """Neither a local copy nor the Hugging Face hub could provide the requested file."""


# ----------------------------------------------------------------------------------------------
# Finding the file
# ----------------------------------------------------------------------------------------------


def _filenames_for(split: str, repo_id: str, filename: str | None) -> list[str]:
    """Candidate file names for a split, preferred first (an explicit `filename` wins)."""
    if split not in SPLITS:
        raise ValueError(f"unknown LongMemEval split {split!r}; expected one of {SPLITS}")
    if filename:
        return [filename]
    if repo_id == ORIGINAL_REPO_ID:
        return [ORIGINAL_FILENAMES[split], CLEANED_FILENAMES[split]]
    return list(dict.fromkeys([CLEANED_FILENAMES[split], ORIGINAL_FILENAMES[split]]))


def _local_file(location: Path, names: list[str], origin: str) -> Path:
    """The file at `location` itself, or the first of `names` inside that directory."""
    if location.is_file():
        return location
    if location.is_dir():
        for name in names:
            if (location / name).is_file():
                return location / name
        raise DataUnavailableError(
            f"{origin} points at the directory {location}, which holds none of {names}. "
            f"Put the LongMemEval file there, or run without LongMemEval: make reproduce PROFILE=offline."
        )
    raise DataUnavailableError(
        f"{origin} points at {location}, which does not exist. Set it to a LongMemEval JSON file or the "
        f"folder holding it, or run without LongMemEval: make reproduce PROFILE=offline."
    )


def _hub_file(repo_id: str, filename: str, revision: str | None, cache_dir: Path) -> Path:
    """Download (or reuse the cached copy of) one dataset file from the Hugging Face hub."""

    cache_dir.mkdir(parents=True, exist_ok=True)
    request = dict(repo_id=repo_id, filename=filename, repo_type="dataset", revision=revision)
    try:  # a cached copy needs no network round trip (and no retries when offline)
        return Path(hf_hub_download(**request, cache_dir=cache_dir, local_files_only=True))
    except (OSError, HTTPError, HFValidationError):
        pass
    try:
        return Path(hf_hub_download(**request, cache_dir=cache_dir))
    except (OSError, HTTPError, HFValidationError) as error:
        reason = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
        raise DataUnavailableError(
            f"LongMemEval file {filename!r} is not available locally and could not be downloaded from the "
            f"hub dataset {repo_id!r} ({reason}). "
            f"Set {LOCAL_DIR_ENV} to a folder holding {filename} (or pass local_path=), or run the "
            f"synthetic-only profile that needs no network: make reproduce PROFILE=offline."
        ) from error


def longmemeval_file(
    split: str = "oracle",
    local_path: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    repo_id: str = DEFAULT_REPO_ID,
    revision: str | None = None,
    filename: str | None = None,
) -> Path:
    """Path of the LongMemEval file for `split`.

    Looks in `local_path` (a file, or a folder holding the split's file), else in
    `$SUPERSEDE_LONGMEMEVAL_DIR`, else downloads from the hub dataset `repo_id` into `cache_dir`
    (default `data/longmemeval/`). An explicit local location that lacks the file is an error, not a
    reason to go to the network. Raises `DataUnavailableError` when nothing works.
    """
    names = _filenames_for(split, repo_id, filename)
    if local_path is not None:
        return _local_file(Path(local_path).expanduser(), names, "local_path")
    env_location = os.environ.get(LOCAL_DIR_ENV)
    if env_location:
        return _local_file(Path(env_location).expanduser(), names, LOCAL_DIR_ENV)
    cache = Path(cache_dir).expanduser() if cache_dir is not None else DEFAULT_CACHE_DIR
    return _hub_file(repo_id, names[0], revision, cache)


# ----------------------------------------------------------------------------------------------
# Parsing helpers
# ----------------------------------------------------------------------------------------------


def parse_longmemeval_date(text: str) -> datetime:
    """Parse `2023/05/30 (Tue) 23:40` (the weekday is ignored; the time is optional)."""
    day, _, rest = text.strip().partition(" (")
    clock = rest.partition(")")[2].strip()
    if clock:
        return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M")
    return datetime.strptime(day, "%Y/%m/%d")


# "A (or B)" / "A (or B, or C)" / "A (also acceptable: B)" at the end of an answer
_TRAILING_ALTERNATIVES = re.compile(
    r"^(?P<main>.+?)\s*\((?:or|also acceptable:?|alternatively:?)\s+(?P<alternatives>[^()]+)\)\s*\.?$",
    re.IGNORECASE,
)
_OR_SEPARATOR = re.compile(r"\s*,?\s+or\s+", re.IGNORECASE)
_MAX_WORDS_PER_BARE_ALTERNATIVE = 3


def gold_answer_variants(answer: str) -> tuple[str, ...]:
    """Accepted forms of a gold answer: the original text first, then its stated alternatives.

    Conservative on purpose: splits a trailing "(or B)" parenthetical, and a bare "A or B" only when
    both sides are at most three words with no sentence punctuation (so answers that are whole
    sentences, or sentences that merely contain "or", stay whole).
    """
    original = answer.strip()
    variants = [original]
    match = _TRAILING_ALTERNATIVES.match(original)
    if match:
        variants.append(match["main"].strip())
        variants.extend(_OR_SEPARATOR.split(match["alternatives"].strip()))
    elif not re.search(r"[.;:!?()]", original):
        parts = _OR_SEPARATOR.split(original)
        if len(parts) == 2 and all(
            0 < len(part.split()) <= _MAX_WORDS_PER_BARE_ALTERNATIVE for part in parts
        ):
            variants.extend(parts)
    cleaned = (variant.strip().rstrip(",").strip() for variant in variants)
    return tuple(dict.fromkeys(variant for variant in cleaned if variant))


_PREVIOUS_VALUE_PATTERNS = re.compile(
    r"\b(?:previous(?:ly)?|initial(?:ly)?|original(?:ly)?|formerly|at first|prior to"
    r"|(?<!have )(?<!had )(?:i|we) used to|did (?:i|we) use to"
    r"|before (?:i|we|my|our) (?:\w+ ){0,2}?(?:changed|moved|switched|updated|upgraded|replaced|got|started"
    r"|bought|sold|changing|moving|switching)"
    r"|(?:was|were) (?:my|our|the) (?:very )?first)\b",
    re.IGNORECASE,
)


def is_previous_value_question(question: str) -> bool:
    """True when the question asks for an OLD value ("previous", "initially", "used to", ...).

    LongMemEval's knowledge-update type pairs such questions with "currently" twins; the two need
    opposite gold values, so studies report them separately.
    """
    return bool(_PREVIOUS_VALUE_PATTERNS.search(question))


# ----------------------------------------------------------------------------------------------
# Validation and conversion
# ----------------------------------------------------------------------------------------------


_UNENCODABLE = re.compile(r"[\x00\ud800-\udfff]")  # NUL, or a surrogate (paired ones never reach str)


class _RecordChecker:
    """Raises LongMemEvalFormatError that names file, record index, question_id and field."""

    def __init__(self, source_file: str, index: int, record: Any) -> None:
        self.source_file, self.index = source_file, index
        question_id = record.get("question_id") if isinstance(record, dict) else None
        self.question_id = question_id if isinstance(question_id, str) else None
        self.record_chars = 0  # text read so far, against MAX_RECORD_CHARS

    def fail(self, field_name: str, problem: str) -> LongMemEvalFormatError:
        question_id = repr(self.question_id) if self.question_id is not None else "<missing>"
        return LongMemEvalFormatError(
            f"{self.source_file}: record {self.index} (question_id={question_id}): "
            f"field {field_name!r}: {problem}"
        )

    def string(self, value: Any, field_name: str) -> str:
        if not isinstance(value, str):
            raise self.fail(field_name, f"expected a string, got {type(value).__name__}")
        self._check_size(value, field_name)
        bad = _UNENCODABLE.search(value)
        if bad is not None:  # a lone surrogate cannot be sent or written; NUL truncates C strings
            raise self.fail(
                field_name,
                f"holds {bad.group()!r} at character {bad.start()}: not text any model call can carry",
            )
        return value

    def _check_size(self, value: str, field_name: str) -> None:
        """A text field over MAX_TEXT_CHARS, or the one that takes the record over MAX_RECORD_CHARS."""
        if len(value) > MAX_TEXT_CHARS:
            raise self.fail(
                field_name,
                f"{len(value):,} characters, over the {MAX_TEXT_CHARS:,} one text field may hold "
                "(docs/diagnose.md, 'Limits'): a damaged or foreign file, not a LongMemEval record",
            )
        self.record_chars += len(value)
        if self.record_chars > MAX_RECORD_CHARS:
            raise self.fail(
                field_name,
                f"takes the record's text over {MAX_RECORD_CHARS:,} characters, the most one record may "
                "hold (docs/diagnose.md, 'Limits')",
            )

    def known_question_type(self, value: Any) -> str:
        question_type = self.string(value, "question_type")
        if question_type not in QUESTION_TYPES:
            raise self.fail(
                "question_type", f"unknown {question_type!r}; the known types: {', '.join(QUESTION_TYPES)}"
            )
        return question_type

    def session_ids(self, session_ids: list[str], answer_session_ids: list[str]) -> None:
        """Session ids unique, and every answer session one of the haystack's."""
        seen: set[str] = set()
        for position, session_id in enumerate(session_ids):
            if session_id in seen:
                raise self.fail(f"haystack_session_ids[{position}]", f"duplicate session id {session_id!r}")
            seen.add(session_id)
        missing = [session_id for session_id in answer_session_ids if session_id not in seen]
        if missing:
            raise self.fail("answer_session_ids", f"not in haystack_session_ids: {', '.join(missing[:5])}")

    def string_list(self, value: Any, field_name: str) -> list[str]:
        if not isinstance(value, list):
            raise self.fail(field_name, f"expected a list, got {type(value).__name__}")
        return [self.string(item, f"{field_name}[{position}]") for position, item in enumerate(value)]

    def date(self, value: Any, field_name: str) -> datetime:
        text = self.string(value, field_name)
        try:
            return parse_longmemeval_date(text)
        except ValueError:
            raise self.fail(
                field_name, f"unparseable date {text!r}; expected e.g. '2023/05/30 (Tue) 23:40'"
            ) from None

    def answer(self, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail("answer", f"expected a string or a number, got {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail("answer", f"{value} is not a finite number")
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 1300.0 and 1300 name the same answer
        text = (self.string(value, "answer") if isinstance(value, str) else str(value)).strip()
        if not text:
            raise self.fail("answer", "empty answer")
        return text

    def turn(self, value: Any, field_name: str) -> Turn:
        if not isinstance(value, dict):
            raise self.fail(field_name, f"expected a turn object, got {type(value).__name__}")
        for key in ("role", "content"):
            if key not in value:
                raise self.fail(f"{field_name}.{key}", "missing")
        role = self.string(value["role"], f"{field_name}.role")
        if role not in ROLES:
            raise self.fail(f"{field_name}.role", f"expected one of {ROLES}, got {role!r}")
        has_answer = value.get("has_answer")
        if has_answer is not None and not isinstance(has_answer, bool):
            raise self.fail(f"{field_name}.has_answer", f"expected true/false, got {has_answer!r}")
        return Turn(
            role=role, content=self.string(value["content"], f"{field_name}.content"), has_answer=has_answer
        )


def _episode_from_record(record: Any, index: int, source_file: str, split: str) -> Episode:
    checker = _RecordChecker(source_file, index, record)
    if not isinstance(record, dict):
        raise checker.fail("<record>", f"expected a JSON object, got {type(record).__name__}")
    for field_name in REQUIRED_FIELDS:
        if field_name not in record:
            raise checker.fail(field_name, "missing")
    question_id = checker.string(record["question_id"], "question_id")
    question_type = checker.known_question_type(record["question_type"])
    question = checker.string(record["question"], "question")
    checker.date(record["question_date"], "question_date")
    gold_text = checker.answer(record["answer"])
    dates = checker.string_list(record["haystack_dates"], "haystack_dates")
    session_ids = checker.string_list(record["haystack_session_ids"], "haystack_session_ids")
    answer_session_ids = checker.string_list(record["answer_session_ids"], "answer_session_ids")
    raw_sessions = record["haystack_sessions"]
    if not isinstance(raw_sessions, list):
        raise checker.fail(
            "haystack_sessions", f"expected a list of sessions, got {type(raw_sessions).__name__}"
        )
    if not len(dates) == len(session_ids) == len(raw_sessions):
        raise checker.fail(
            "haystack_dates",
            f"lengths differ: haystack_dates {len(dates)}, haystack_session_ids {len(session_ids)}, "
            f"haystack_sessions {len(raw_sessions)}",
        )
    if not raw_sessions:
        raise checker.fail("haystack_sessions", "no sessions: an episode needs at least one")
    checker.session_ids(session_ids, answer_session_ids)

    dated_sessions = []
    for position, (date, session_id, raw_turns) in enumerate(
        zip(dates, session_ids, raw_sessions, strict=True)
    ):
        field_name = f"haystack_sessions[{position}]"
        if not isinstance(raw_turns, list):
            raise checker.fail(field_name, f"expected a list of turns, got {type(raw_turns).__name__}")
        if not raw_turns:
            raise checker.fail(field_name, "no turns: every session needs at least one")
        turns = tuple(checker.turn(turn, f"{field_name}[{number}]") for number, turn in enumerate(raw_turns))
        when = checker.date(date, f"haystack_dates[{position}]")
        dated_sessions.append((when, position, Session(session_id=session_id, date=date, turns=turns)))
    dated_sessions.sort(key=lambda item: item[0])  # stable: equal dates keep file order

    is_abstention = "_abs" in question_id
    evidence_ids = set(answer_session_ids)
    return Episode(
        episode_id=question_id,
        sessions=tuple(session for _, _, session in dated_sessions),
        question=question,
        question_date=record["question_date"],
        gold_answers=(gold_text,) if is_abstention else gold_answer_variants(gold_text),
        superseded_values=(),  # LongMemEval does not label the stale values
        is_abstention=is_abstention,
        asks_previous_value=is_previous_value_question(question),
        source=f"longmemeval:{split}",
        question_type=question_type,
        gold_text=gold_text,
        metadata={
            "source_file": source_file,
            "record_index": index,
            "answer_session_ids": answer_session_ids,
            "n_evidence_sessions": sum(session_id in evidence_ids for session_id in session_ids),
            "n_haystack_sessions": len(session_ids),
            "original_session_positions": [position for _, position, _ in dated_sessions],
        },
    )


def episodes_from_records(records: Sequence[Any], source_file: str, split: str) -> list[Episode]:
    """Validate upstream records and convert each to an Episode (sessions in date order)."""
    if not isinstance(records, list):
        raise LongMemEvalFormatError(
            f"{source_file}: expected a JSON list of records at the top level, got {type(records).__name__}"
        )
    episodes = []
    first_index: dict[str, int] = {}
    for index, record in enumerate(records):
        episode = _episode_from_record(record, index, source_file, split)
        if episode.episode_id in first_index:
            raise _RecordChecker(source_file, index, record).fail(
                "question_id", f"duplicate of record {first_index[episode.episode_id]}"
            )
        first_index[episode.episode_id] = index
        episodes.append(episode)
    return episodes


def read_longmemeval_records(path: str | os.PathLike[str]) -> list[Any]:
    """The raw records of one LongMemEval JSON file (the top level must be a list)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise LongMemEvalFormatError(
            f"{path}: not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start}); "
            "LongMemEval files are UTF-8 JSON: re-download the file or convert it to UTF-8"
        ) from None
    try:
        records = json.loads(text)
    except json.JSONDecodeError as error:
        raise LongMemEvalFormatError(f"{path}: not valid JSON ({error})") from error
    except RecursionError:
        raise LongMemEvalFormatError(
            f"{path}: JSON nested too deeply to read (LongMemEval records are a few levels deep)"
        ) from None
    if not isinstance(records, list):
        raise LongMemEvalFormatError(
            f"{path}: expected a JSON list of records at the top level, got {type(records).__name__}"
        )
    return records


def load_longmemeval(
    split: str = "oracle",
    question_type: str | None = "knowledge-update",
    local_path: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    repo_id: str = DEFAULT_REPO_ID,
    revision: str | None = None,
    filename: str | None = None,
) -> list[Episode]:
    """LongMemEval questions of `question_type` (None: all) from `split`, as Episodes in file order.

    Every record of the file is validated, not only the kept ones. `limit` keeps the first that many
    after filtering. A file with no question of the type raises `NoQuestionsError` (a study on it
    would measure nothing). See `longmemeval_file` for where the file comes from.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    path = longmemeval_file(
        split,
        local_path=local_path,
        cache_dir=cache_dir,
        repo_id=repo_id,
        revision=revision,
        filename=filename,
    )
    episodes = episodes_from_records(read_longmemeval_records(path), source_file=str(path), split=split)
    if question_type is not None:
        known = dict.fromkeys([*QUESTION_TYPES, *(episode.question_type for episode in episodes)])
        if question_type not in known:
            raise ValueError(
                f"unknown question_type {question_type!r} for {path}; choose one of {', '.join(known)} "
                "(or None for all)"
            )
        kept = [episode for episode in episodes if episode.question_type == question_type]
        if not kept and limit != 0:
            raise NoQuestionsError(_no_questions_reason(path, question_type, episodes))
        episodes = kept
    elif not episodes and limit != 0:
        raise NoQuestionsError(f"{path}: no questions: the file holds no records")
    return episodes if limit is None else episodes[:limit]


def _no_questions_reason(path: Path, question_type: str, episodes: list[Episode]) -> str:
    if not episodes:
        return f"{path}: no {question_type} questions: the file holds no records"
    counts = pd.Series([episode.question_type for episode in episodes]).value_counts()
    held = ", ".join(f"{count} {name}" for name, count in counts.items())
    return (
        f"{path}: no {question_type} questions among its {len(episodes)} records ({held}); "
        "choose a file that holds them, or another question type"
    )


# ----------------------------------------------------------------------------------------------
# Statistics for notebook 01
# ----------------------------------------------------------------------------------------------

STATISTIC_COLUMNS = [
    "episode_id",
    "source",
    "question_type",
    "n_sessions",
    "n_turns",
    "total_chars",
    "approx_tokens",
    "n_evidence_sessions",
    "is_abstention",
    "asks_previous_value",
]
_MEASURED_COLUMNS = ("n_sessions", "n_turns", "total_chars", "approx_tokens", "n_evidence_sessions")


def dataset_statistics(episodes: Iterable[Episode]) -> pd.DataFrame:
    """One row per episode: sizes of its history and the flags studies split on.

    `approx_tokens` is total characters / 4, a rough English-text estimate (no tokenizer is run).
    `n_evidence_sessions` counts the sessions listed in LongMemEval's `answer_session_ids`; for other
    sources it counts the sessions with a turn marked `has_answer`.
    """
    rows = []
    for episode in episodes:
        total_chars = episode.total_chars
        evidence = episode.metadata.get("n_evidence_sessions")
        rows.append(
            {
                "episode_id": episode.episode_id,
                "source": episode.source,
                "question_type": episode.question_type,
                "n_sessions": len(episode.sessions),
                "n_turns": sum(len(session.turns) for session in episode.sessions),
                "total_chars": total_chars,
                "approx_tokens": total_chars // APPROX_CHARS_PER_TOKEN,
                "n_evidence_sessions": (
                    int(evidence) if evidence is not None else sum(s.is_evidence for s in episode.sessions)
                ),
                "is_abstention": episode.is_abstention,
                "asks_previous_value": episode.asks_previous_value,
            }
        )
    return pd.DataFrame(rows, columns=STATISTIC_COLUMNS)


def _summary_of(frame: pd.DataFrame) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "n_episodes": len(frame),
        "n_abstention": int(frame["is_abstention"].sum()),
        "n_asks_previous_value": int(frame["asks_previous_value"].sum()),
    }
    for column in _MEASURED_COLUMNS:
        values = frame[column]
        summary[f"mean_{column}"] = float(values.mean()) if len(values) else None
        summary[f"median_{column}"] = float(values.median()) if len(values) else None
    summary["max_total_chars"] = int(frame["total_chars"].max()) if len(frame) else None
    return summary


@overload
def summarize_statistics(statistics: pd.DataFrame) -> dict[str, Any]: ...
@overload
def summarize_statistics(statistics: Mapping[str, pd.DataFrame]) -> pd.DataFrame: ...
def summarize_statistics(
    statistics: pd.DataFrame | Mapping[str, pd.DataFrame],
) -> dict[str, Any] | pd.DataFrame:
    """Counts and means/medians of a `dataset_statistics` frame.

    Given one frame: a dict. Given {label: frame}: a table with one row per label (notebook 01's
    per-episode-set summary), the label in column `episode_set`.
    """
    if isinstance(statistics, pd.DataFrame):
        return _summary_of(statistics)
    return pd.DataFrame([{"episode_set": label, **_summary_of(frame)} for label, frame in statistics.items()])
