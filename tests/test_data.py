"""LongMemEval loader: upstream layout, validation errors, file lookup, statistics."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError

from supersede_lib.agent import episode
from supersede_lib.data import longmemeval as data
from supersede_lib.data.longmemeval import (
    DataUnavailableError,
    LongMemEvalFormatError,
    dataset_statistics,
    episodes_from_records,
    gold_answer_variants,
    is_previous_value_question,
    load_longmemeval,
    longmemeval_file,
    summarize_statistics,
)

FIXTURES = Path(__file__).parent / "fixtures" / "longmemeval"
ORACLE_FIXTURE = FIXTURES / "longmemeval_oracle.json"
REAL_SAMPLES = Path(__file__).resolve().parents[1] / ".." / "shared" / "longmemeval-samples"


@pytest.fixture(autouse=True)
def _no_local_dir_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's SUPERSEDE_LONGMEMEVAL_DIR must not change what these tests read."""
    monkeypatch.delenv(data.LOCAL_DIR_ENV, raising=False)


def _oracle_records() -> list[dict[str, Any]]:
    return json.loads(ORACLE_FIXTURE.read_text(encoding="utf-8"))


def _by_id(episodes: list[episode.Episode]) -> dict[str, episode.Episode]:
    return {item.episode_id: item for item in episodes}


# ---------------------------------------------------------------------------------------------
# Converting well-formed records
# ---------------------------------------------------------------------------------------------


def test_oracle_fixture_loads_knowledge_update_items_with_sessions_in_date_order() -> None:
    episodes = load_longmemeval(local_path=ORACLE_FIXTURE)
    assert [item.episode_id for item in episodes] == [
        "fx_city_1",
        "fx_5k_prev",
        "fx_5k_curr",
        "fx_savings",
        "fx_savings_abs",
    ]
    city = episodes[0]
    assert [session.session_id for session in city.sessions] == ["answer_fx_city_1", "answer_fx_city_2"]
    assert [session.date for session in city.sessions] == ["2023/05/02 (Tue) 18:30", "2023/05/20 (Sat) 09:00"]
    assert "Lisbon" in city.sessions[0].turns[0].content and "Oslo" in city.sessions[1].turns[0].content
    assert city.sessions[0].turns[0] == episode.Turn(
        "user", "I live in Lisbon and I am looking for a climbing gym nearby.", True
    )
    assert city.gold_answers == ("Oslo",) and city.gold_text == "Oslo"
    assert city.superseded_values == ()
    assert city.source == "longmemeval:oracle" and city.question_type == "knowledge-update"
    assert city.question == "Which city do I live in?" and city.question_date == "2023/06/01 (Thu) 10:00"
    assert city.metadata["answer_session_ids"] == ["answer_fx_city_2", "answer_fx_city_1"]
    assert city.metadata["record_index"] == 0 and city.metadata["n_evidence_sessions"] == 2
    assert city.metadata["original_session_positions"] == [1, 0]
    assert city.metadata["source_file"] == str(ORACLE_FIXTURE)


def test_integer_answer_is_coerced_to_text() -> None:
    savings = _by_id(load_longmemeval(local_path=ORACLE_FIXTURE))["fx_savings"]
    assert savings.gold_text == "1300" and savings.gold_answers == ("1300",)


def test_alternative_answers_become_variants_and_the_original_is_kept() -> None:
    current = _by_id(load_longmemeval(local_path=ORACLE_FIXTURE))["fx_5k_curr"]
    assert current.gold_text == "25 minutes and 50 seconds (or 25:50)"
    assert current.gold_answers == (
        "25 minutes and 50 seconds (or 25:50)",
        "25 minutes and 50 seconds",
        "25:50",
    )


def test_abstention_is_marked_by_abs_in_the_question_id_and_its_explanation_is_not_split() -> None:
    episodes = _by_id(load_longmemeval(local_path=ORACLE_FIXTURE))
    abstention = episodes["fx_savings_abs"]
    assert abstention.is_abstention and abstention.question_type == "knowledge-update"
    assert abstention.gold_answers == (abstention.gold_text,)
    assert not any(item.is_abstention for key, item in episodes.items() if key != "fx_savings_abs")


def test_previous_value_twin_is_flagged_and_the_current_twin_is_not() -> None:
    episodes = _by_id(load_longmemeval(local_path=ORACLE_FIXTURE))
    assert episodes["fx_5k_prev"].asks_previous_value
    assert not episodes["fx_5k_curr"].asks_previous_value


def test_question_type_filter_and_limit() -> None:
    every = load_longmemeval(local_path=ORACLE_FIXTURE, question_type=None)
    assert len(every) == 6 and every[-1].question_type == "single-session-user"
    only_user = load_longmemeval(local_path=ORACLE_FIXTURE, question_type="single-session-user")
    assert [item.episode_id for item in only_user] == ["fx_degree"]
    assert [item.episode_id for item in load_longmemeval(local_path=ORACLE_FIXTURE, limit=2)] == [
        "fx_city_1",
        "fx_5k_prev",
    ]
    assert load_longmemeval(local_path=ORACLE_FIXTURE, limit=0) == []
    with pytest.raises(ValueError, match="limit"):
        load_longmemeval(local_path=ORACLE_FIXTURE, limit=-1)


def test_s_split_from_a_directory_keeps_missing_has_answer_as_none() -> None:
    (item,) = load_longmemeval(split="s", local_path=FIXTURES)
    assert item.source == "longmemeval:s"
    assert item.metadata["source_file"].endswith("longmemeval_s_cleaned.json")
    assert [session.date[:10] for session in item.sessions] == [
        "2023/05/01",
        "2023/05/02",
        "2023/05/20",
        "2023/05/25",
    ]
    distractor = item.sessions[0]
    assert distractor.session_id == "ultrachat_fx_b"
    assert all(turn.has_answer is None for turn in distractor.turns) and not distractor.is_evidence
    assert [session.is_evidence for session in item.sessions] == [False, True, True, False]
    assert item.metadata["n_evidence_sessions"] == 2 and item.metadata["n_haystack_sessions"] == 4


def test_equal_dates_keep_file_order_and_times_of_day_count() -> None:
    record = _oracle_records()[0]
    record["haystack_dates"] = ["2023/05/02 (Tue) 18:30", "2023/05/02 (Tue) 18:30"]
    (tied,) = episodes_from_records([record], source_file="mem.json", split="oracle")
    assert [session.session_id for session in tied.sessions] == ["answer_fx_city_2", "answer_fx_city_1"]
    record["haystack_dates"] = ["2023/05/02 (Tue) 18:31", "2023/05/02 (Tue) 09:05"]
    (same_day,) = episodes_from_records([record], source_file="mem.json", split="oracle")
    assert [session.session_id for session in same_day.sessions] == ["answer_fx_city_1", "answer_fx_city_2"]


def test_episodes_survive_a_dict_round_trip() -> None:
    for item in load_longmemeval(local_path=ORACLE_FIXTURE, question_type=None):
        assert episode.Episode.from_dict(json.loads(json.dumps(item.to_dict()))) == item


@pytest.mark.parametrize(
    ("answer", "variants"),
    [
        (
            "25 minutes and 50 seconds (or 25:50)",
            ("25 minutes and 50 seconds (or 25:50)", "25 minutes and 50 seconds", "25:50"),
        ),
        (
            "$1,300 (or 1300 dollars, or $1.3k)",
            ("$1,300 (or 1300 dollars, or $1.3k)", "$1,300", "1300 dollars", "$1.3k"),
        ),
        ("Spotify or Apple Music", ("Spotify or Apple Music", "Spotify", "Apple Music")),
        ("Business Administration", ("Business Administration",)),
        ("Toyota Corolla (silver)", ("Toyota Corolla (silver)",)),
        ("  Oslo ", ("Oslo",)),
        # sentences that merely contain "or" stay whole
        (
            "You should wear the blue jacket or the grey coat depending on the weather",
            ("You should wear the blue jacket or the grey coat depending on the weather",),
        ),
        ("Yes, or at least that was the plan.", ("Yes, or at least that was the plan.",)),
    ],
)
def test_gold_answer_variants_split_only_stated_alternatives(answer: str, variants: tuple[str, ...]) -> None:
    assert gold_answer_variants(answer) == variants


@pytest.mark.parametrize(
    "question",
    [
        "What was my previous personal best time for the charity 5K run?",
        "Where did I initially keep the old sneakers?",
        "How many bikes did I originally own?",
        "What was my personal best before I changed my training plan?",
        "Which gym did I use to go to before I moved?",
        "Which city did I live in before I finally moved?",
        "What brand of running shoes did I used to wear?",
        "What was my first car?",
        "Which phone did I have at first?",
        "What was the previously agreed rent?",
    ],
)
def test_questions_asking_for_an_old_value_are_flagged(question: str) -> None:
    assert is_previous_value_question(question)


@pytest.mark.parametrize(
    "question",
    [
        "What is my current personal best time for the charity 5K run?",
        "Where do I currently keep the old sneakers?",
        "How many bikes do I own now?",
        "Which city do I live in?",
        "What was the amount I was pre-approved for when I got my mortgage from Wells Fargo?",
        "What app have I used to track my runs most recently?",
        "How many times have I been to the first-aid course this year?",
    ],
)
def test_questions_about_the_current_value_are_not_flagged(question: str) -> None:
    assert not is_previous_value_question(question)


# ---------------------------------------------------------------------------------------------
# Malformed records
# ---------------------------------------------------------------------------------------------


def _break_turn_role(record: dict) -> None:
    del record["haystack_sessions"][1][0]["role"]


MALFORMED_CASES = [
    ("missing haystack_dates", lambda r: r.pop("haystack_dates"), "'haystack_dates'", "missing"),
    ("missing answer", lambda r: r.pop("answer"), "'answer'", "missing"),
    ("dates too short", lambda r: r["haystack_dates"].pop(), "'haystack_dates'", "lengths differ"),
    (
        "ids too long",
        lambda r: r["haystack_session_ids"].append("extra"),
        "'haystack_dates'",
        "haystack_session_ids 3",
    ),
    ("turn without role", _break_turn_role, "'haystack_sessions[1][0].role'", "missing"),
    (
        "turn without content",
        lambda r: r["haystack_sessions"][0][1].pop("content"),
        "'haystack_sessions[0][1].content'",
        "missing",
    ),
    (
        "bad role",
        lambda r: r["haystack_sessions"][0][0].update(role="system"),
        "'haystack_sessions[0][0].role'",
        "'system'",
    ),
    (
        "session not a list",
        lambda r: r["haystack_sessions"].__setitem__(0, {"role": "user"}),
        "'haystack_sessions[0]'",
        "list of turns",
    ),
    (
        "sessions not a list",
        lambda r: r.update(haystack_sessions="oops"),
        "'haystack_sessions'",
        "list of sessions",
    ),
    (
        "bad date",
        lambda r: r["haystack_dates"].__setitem__(1, "May 2nd 2023"),
        "'haystack_dates[1]'",
        "unparseable date 'May 2nd 2023'",
    ),
    ("bad question date", lambda r: r.update(question_date="2023-06-01"), "'question_date'", "unparseable"),
    ("answer is a list", lambda r: r.update(answer=["Oslo"]), "'answer'", "got list"),
    (
        "content not text",
        lambda r: r["haystack_sessions"][0][0].update(content=None),
        "'haystack_sessions[0][0].content'",
        "string",
    ),
    (
        "has_answer not bool",
        lambda r: r["haystack_sessions"][0][0].update(has_answer="yes"),
        "'haystack_sessions[0][0].has_answer'",
        "'yes'",
    ),
    (
        "answer ids not strings",
        lambda r: r.update(answer_session_ids=[3]),
        "'answer_session_ids[0]'",
        "string",
    ),
    ("NaN answer", lambda r: r.update(answer=float("nan")), "'answer'", "not a finite number"),
    ("infinite answer", lambda r: r.update(answer=float("inf")), "'answer'", "not a finite number"),
    (
        "no sessions",
        lambda r: r.update(haystack_dates=[], haystack_session_ids=[], haystack_sessions=[]),
        "'haystack_sessions'",
        "no sessions",
    ),
    (
        "empty session",
        lambda r: r["haystack_sessions"].__setitem__(1, []),
        "'haystack_sessions[1]'",
        "no turns",
    ),
    (
        "misspelt question type",
        lambda r: r.update(question_type="knowledge-updat"),
        "'question_type'",
        "unknown 'knowledge-updat'; the known types: single-session-user",
    ),
    ("lone surrogate", lambda r: r.update(answer="Oslo\ud800"), "'answer'", "at character 4"),
    (
        "NUL in a turn",
        lambda r: r["haystack_sessions"][0][0].update(content="a\x00b"),
        "'haystack_sessions[0][0].content'",
        "'\\x00'",
    ),
    (
        "answer session not in the haystack",
        lambda r: r.update(answer_session_ids=["nowhere"]),
        "'answer_session_ids'",
        "not in haystack_session_ids: nowhere",
    ),
    (
        "duplicate session id",
        lambda r: r["haystack_session_ids"].__setitem__(1, r["haystack_session_ids"][0]),
        "'haystack_session_ids[1]'",
        "duplicate session id",
    ),
]


@pytest.mark.parametrize(
    ("label", "damage", "field", "problem"), MALFORMED_CASES, ids=[c[0] for c in MALFORMED_CASES]
)
def test_malformed_record_error_names_file_index_question_id_and_field(
    tmp_path: Path, label: str, damage: Any, field: str, problem: str
) -> None:
    records = _oracle_records()
    broken = copy.deepcopy(records[2])  # fx_5k_curr, placed at index 3 below
    damage(broken)
    path = tmp_path / "broken_oracle.json"
    path.write_text(json.dumps([*records[:3], broken, *records[3:]]), encoding="utf-8")
    with pytest.raises(LongMemEvalFormatError) as raised:
        load_longmemeval(local_path=path)
    message = str(raised.value)
    assert str(path) in message, label
    assert "record 3" in message and "question_id='fx_5k_curr'" in message
    assert f"field {field}" in message
    assert problem in message
    assert isinstance(raised.value, ValueError)


def test_record_without_question_id_or_not_an_object_is_still_located() -> None:
    record = _oracle_records()[0]
    del record["question_id"]
    with pytest.raises(
        LongMemEvalFormatError, match=r"mem\.json: record 0 \(question_id=<missing>\): field 'question_id'"
    ):
        episodes_from_records([record], source_file="mem.json", split="oracle")
    with pytest.raises(LongMemEvalFormatError, match=r"mem\.json: record 1 .*expected a JSON object"):
        episodes_from_records([_oracle_records()[0], "not a record"], source_file="mem.json", split="oracle")


def test_malformed_record_outside_the_kept_question_type_still_fails(tmp_path: Path) -> None:
    records = _oracle_records()
    records[5]["haystack_dates"] = []  # the single-session-user record
    path = tmp_path / "longmemeval_oracle.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(LongMemEvalFormatError, match="record 5 .*fx_degree"):
        load_longmemeval(local_path=path)


def test_json_nested_too_deeply_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "longmemeval_oracle.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(LongMemEvalFormatError, match=r"longmemeval_oracle\.json: JSON nested too deeply"):
        load_longmemeval(local_path=path)


@pytest.mark.parametrize("content", ['{"question_id": "x"}', "[1, 2", '"text"'])
def test_file_that_is_not_a_json_list_names_the_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "longmemeval_oracle.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LongMemEvalFormatError, match=str(path)):
        load_longmemeval(local_path=path)


def test_duplicate_question_ids_name_both_records(tmp_path: Path) -> None:
    records = _oracle_records()
    records.append(copy.deepcopy(records[1]))
    path = tmp_path / "longmemeval_oracle.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(LongMemEvalFormatError) as raised:
        load_longmemeval(local_path=path)
    message = str(raised.value)
    question_id = records[1]["question_id"]
    assert str(path) in message and f"record {len(records) - 1}" in message
    assert f"question_id={question_id!r}" in message and "field 'question_id'" in message
    assert "duplicate of record 1" in message


@pytest.mark.parametrize(
    "encoded",
    [
        pytest.param(lambda text: text.replace("Oslo", "Tromsø").encode("latin-1"), id="latin-1"),
        pytest.param(lambda text: text.encode("utf-16"), id="utf-16"),
        pytest.param(lambda text: bytes(range(256)) * 4, id="random bytes"),
    ],
)
def test_undecodable_bytes_name_the_file(tmp_path: Path, encoded: Any) -> None:
    path = tmp_path / "longmemeval_oracle.json"
    text = ORACLE_FIXTURE.read_text(encoding="utf-8")
    path.write_bytes(encoded(text))
    with pytest.raises(LongMemEvalFormatError) as raised:
        load_longmemeval(local_path=path)
    message = str(raised.value)
    assert str(path) in message and "UTF-8" in message and "byte" in message


def test_a_text_field_above_the_stated_size_is_refused_naming_file_record_and_field(tmp_path: Path) -> None:
    records = _oracle_records()
    records[2]["haystack_sessions"][0][0]["content"] = "x" * (data.MAX_TEXT_CHARS + 1)
    path = tmp_path / "longmemeval_oracle.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(LongMemEvalFormatError) as raised:
        load_longmemeval(local_path=path)
    message = str(raised.value)
    assert str(path) in message and "record 2" in message and "question_id='fx_5k_curr'" in message
    assert "field 'haystack_sessions[0][0].content'" in message and f"{data.MAX_TEXT_CHARS:,}" in message


def test_a_record_above_the_stated_size_is_refused_at_the_field_that_crosses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "MAX_RECORD_CHARS", 2_000)
    records = _oracle_records()
    turns = records[0]["haystack_sessions"][0]
    turns.extend({"role": "user", "content": "y" * 900} for _ in range(3))
    path = tmp_path / "longmemeval_oracle.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(
        LongMemEvalFormatError, match=r"record 0 .*haystack_sessions\[0\]\[\d+\]\.content.*2,000"
    ):
        load_longmemeval(local_path=path)


def test_a_file_without_the_question_type_names_the_file_and_what_it_holds(tmp_path: Path) -> None:
    records = [record for record in _oracle_records() if record["question_type"] != "knowledge-update"]
    path = tmp_path / "longmemeval_oracle.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(data.NoQuestionsError) as raised:
        load_longmemeval(local_path=path)
    message = str(raised.value)
    assert str(path) in message and "no knowledge-update questions" in message
    assert f"among its {len(records)} records" in message and "single-session-user" in message
    (tmp_path / "empty.json").write_text("[]", encoding="utf-8")
    with pytest.raises(
        data.NoQuestionsError, match="empty.json: no knowledge-update questions: the file holds no records"
    ):
        load_longmemeval(local_path=tmp_path / "empty.json")


def test_question_type_typo_lists_the_allowed_types() -> None:
    with pytest.raises(ValueError) as raised:
        load_longmemeval(local_path=ORACLE_FIXTURE, question_type="knowledge_update")
    message = str(raised.value)
    assert "'knowledge_update'" in message and "knowledge-update" in message
    assert "single-session-user" in message and str(ORACLE_FIXTURE) in message


def test_episodes_from_records_rejects_a_non_list() -> None:
    with pytest.raises(LongMemEvalFormatError, match="mem.json: expected a JSON list"):
        not_a_list: Any = {"question_id": "x"}
        episodes_from_records(not_a_list, source_file="mem.json", split="oracle")


# ---------------------------------------------------------------------------------------------
# Finding the file: local path, environment variable, hub (faked)
# ---------------------------------------------------------------------------------------------


def test_environment_variable_directory_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.LOCAL_DIR_ENV, str(FIXTURES))
    assert longmemeval_file("oracle") == ORACLE_FIXTURE
    assert longmemeval_file("s") == FIXTURES / "longmemeval_s_cleaned.json"
    assert len(load_longmemeval()) == 5


def test_directory_with_original_release_names_is_accepted(tmp_path: Path) -> None:
    original = tmp_path / "longmemeval_s.json"
    original.write_text(
        (FIXTURES / "longmemeval_s_cleaned.json").read_text(encoding="utf-8"), encoding="utf-8"
    )
    assert longmemeval_file("s", local_path=tmp_path) == original


def test_explicit_local_location_without_the_file_does_not_fall_back_to_the_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_network(**kwargs: Any) -> str:
        raise AssertionError("must not try the hub when a local location was given")

    monkeypatch.setattr("supersede_lib.data.longmemeval.hf_hub_download", no_network)
    with pytest.raises(DataUnavailableError, match="longmemeval_m_cleaned.json.*PROFILE=offline"):
        longmemeval_file("m", local_path=FIXTURES)
    monkeypatch.setenv(data.LOCAL_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(DataUnavailableError, match="SUPERSEDE_LONGMEMEVAL_DIR.*does not exist"):
        longmemeval_file("oracle")


def test_unknown_split_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown LongMemEval split 'xl'"):
        longmemeval_file("xl", local_path=FIXTURES)


class FakeHub:
    """Stands in for hf_hub_download: records each call, serves a local file or fails."""

    def __init__(self, serve: Path | None, cached: bool) -> None:
        self.serve, self.cached, self.calls = serve, cached, []

    def __call__(self, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        if kwargs.get("local_files_only") and not self.cached:
            raise LocalEntryNotFoundError("not in the cache")
        if self.serve is None:
            raise LocalEntryNotFoundError("Name or service not known")
        return str(self.serve)


@pytest.mark.parametrize("cached", [True, False])
def test_hub_download_passes_repo_filename_and_cache_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cached: bool
) -> None:
    hub = FakeHub(ORACLE_FIXTURE, cached=cached)
    monkeypatch.setattr("supersede_lib.data.longmemeval.hf_hub_download", hub)
    episodes = load_longmemeval(cache_dir=tmp_path / "cache")
    assert len(episodes) == 5
    assert len(hub.calls) == (1 if cached else 2)
    assert hub.calls[0]["local_files_only"] is True  # a cached copy needs no network
    if not cached:
        assert "local_files_only" not in hub.calls[1]
    for call in hub.calls:
        assert call["repo_id"] == "xiaowu0162/longmemeval-cleaned"
        assert call["filename"] == "longmemeval_oracle.json"
        assert call["repo_type"] == "dataset" and call["revision"] is None
        assert Path(call["cache_dir"]) == tmp_path / "cache"


def test_hub_overrides_for_the_original_release(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hub = FakeHub(FIXTURES / "longmemeval_s_cleaned.json", cached=True)
    monkeypatch.setattr("supersede_lib.data.longmemeval.hf_hub_download", hub)
    (item,) = load_longmemeval(
        split="s", repo_id=data.ORIGINAL_REPO_ID, revision="abc123", cache_dir=tmp_path
    )
    assert item.source == "longmemeval:s"
    assert hub.calls[0]["repo_id"] == "xiaowu0162/longmemeval" and hub.calls[0]["revision"] == "abc123"
    assert hub.calls[0]["filename"] == "longmemeval_s.json"
    load_longmemeval(split="s", filename="my_copy.json", cache_dir=tmp_path)
    assert hub.calls[-1]["filename"] == "my_copy.json"


def test_default_cache_dir_is_under_data_longmemeval(monkeypatch: pytest.MonkeyPatch) -> None:
    hub = FakeHub(ORACLE_FIXTURE, cached=True)
    monkeypatch.setattr("supersede_lib.data.longmemeval.hf_hub_download", hub)
    monkeypatch.setattr(data.Path, "mkdir", lambda *args, **kwargs: None)  # leave the real tree alone
    longmemeval_file("oracle")
    assert Path(hub.calls[0]["cache_dir"]).parts[-2:] == ("data", "longmemeval")


def test_hub_failure_raises_data_unavailable_naming_what_to_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("supersede_lib.data.longmemeval.hf_hub_download", FakeHub(None, cached=False))
    with pytest.raises(DataUnavailableError) as raised:
        load_longmemeval(cache_dir=tmp_path)
    message = str(raised.value)
    assert "SUPERSEDE_LONGMEMEVAL_DIR" in message and "PROFILE=offline" in message
    assert "longmemeval_oracle.json" in message and "xiaowu0162/longmemeval-cleaned" in message
    assert isinstance(raised.value.__cause__, LocalEntryNotFoundError)


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------


def test_dataset_statistics_has_one_row_per_episode_with_sizes() -> None:
    episodes = load_longmemeval(local_path=ORACLE_FIXTURE)
    frame = dataset_statistics(episodes)
    assert list(frame["episode_id"]) == [item.episode_id for item in episodes]
    city = frame.set_index("episode_id").loc["fx_city_1"]
    expected_chars = sum(len(turn.content) for session in episodes[0].sessions for turn in session.turns)
    assert city["n_sessions"] == 2 and city["n_turns"] == 4 and city["n_evidence_sessions"] == 2
    assert city["total_chars"] == expected_chars and city["approx_tokens"] == expected_chars // 4
    assert frame["is_abstention"].sum() == 1 and frame["asks_previous_value"].sum() == 1


def test_dataset_statistics_of_nothing_keeps_its_columns() -> None:
    frame = dataset_statistics([])
    assert len(frame) == 0 and "approx_tokens" in frame.columns
    assert summarize_statistics(frame)["n_episodes"] == 0
    assert summarize_statistics(frame)["mean_n_sessions"] is None


def test_statistics_count_evidence_from_has_answer_for_non_longmemeval_episodes() -> None:
    sessions = (
        episode.Session("a", "2023/05/01 (Mon) 10:00", (episode.Turn("user", "I live in Oslo.", True),)),
        episode.Session("b", "2023/05/02 (Tue) 10:00", (episode.Turn("user", "Nice weather."),)),
    )
    synthetic = episode.Episode("syn-1", sessions, "Where do I live?", "2023/06/01 (Thu) 10:00", ("Oslo",))
    assert dataset_statistics([synthetic]).loc[0, "n_evidence_sessions"] == 1


def test_summarize_statistics_counts_and_averages() -> None:
    frame = dataset_statistics(load_longmemeval(local_path=ORACLE_FIXTURE, question_type=None))
    summary = summarize_statistics(frame)
    assert (
        summary["n_episodes"] == 6 and summary["n_abstention"] == 1 and summary["n_asks_previous_value"] == 1
    )
    assert summary["mean_n_sessions"] == pytest.approx(11 / 6)
    assert summary["median_n_sessions"] == 2.0
    assert summary["max_total_chars"] == frame["total_chars"].max()
    table = summarize_statistics({"oracle": frame, "first two": frame.head(2)})
    assert isinstance(table, pd.DataFrame)
    assert list(table["episode_set"]) == ["oracle", "first two"] and list(table["n_episodes"]) == [6, 2]


# ---------------------------------------------------------------------------------------------
# Real upstream records (read in place, never copied into the repo)
# ---------------------------------------------------------------------------------------------


def _real_sample(name: str) -> Path:
    path = REAL_SAMPLES / name
    if not path.is_file():
        pytest.skip(f"real LongMemEval sample {path} not present")
    return path


def test_real_oracle_knowledge_update_record() -> None:
    (item,) = load_longmemeval(local_path=_real_sample("lme_oracle_ku_real1.json"))
    assert item.episode_id == "852ce960" and item.question_type == "knowledge-update"
    assert item.gold_text == "$350,000" and "$350,000" in item.gold_answers
    assert len(item.sessions) == 2
    dates = [data.parse_longmemeval_date(session.date) for session in item.sessions]
    assert dates == sorted(dates)
    assert all(session.is_evidence for session in item.sessions)
    assert not item.is_abstention and not item.asks_previous_value


def test_real_s_knowledge_update_record_has_39_sessions_in_date_order() -> None:
    (item,) = load_longmemeval(split="s", local_path=_real_sample("lme_s_ku_real1.json"))
    assert item.episode_id == "852ce960" and len(item.sessions) == 39
    dates = [data.parse_longmemeval_date(session.date) for session in item.sessions]
    assert dates == sorted(dates)
    assert item.metadata["original_session_positions"] != list(range(39))  # the file is not in order
    assert sum(session.is_evidence for session in item.sessions) == 2 == item.metadata["n_evidence_sessions"]
    assert any(turn.has_answer is None for session in item.sessions for turn in session.turns)


def test_real_non_knowledge_update_samples_are_filtered_by_default(tmp_path: Path) -> None:
    s_path = _real_sample("lme_s_sample.json")
    with pytest.raises(data.NoQuestionsError, match="no knowledge-update questions among its 1 records"):
        load_longmemeval(split="s", local_path=s_path)  # a study on it would measure nothing
    (s_item,) = load_longmemeval(split="s", local_path=s_path, question_type=None)
    assert s_item.question_type == "single-session-user" and len(s_item.sessions) == 53
    # this sample holds one bare record (a JSON object, not the upstream list): the loader says so
    oracle_path = _real_sample("lme_oracle_sample.json")
    with pytest.raises(LongMemEvalFormatError, match="expected a JSON list"):
        load_longmemeval(local_path=oracle_path, question_type=None)
    record = json.loads(oracle_path.read_text(encoding="utf-8"))
    (oracle_item,) = episodes_from_records([record], source_file=str(oracle_path), split="oracle")
    assert oracle_item.question_type == "temporal-reasoning"
    as_list = tmp_path / "longmemeval_oracle.json"
    as_list.write_text(json.dumps([record]), encoding="utf-8")
    with pytest.raises(data.NoQuestionsError, match="1 temporal-reasoning"):
        load_longmemeval(local_path=as_list)
    assert [item.episode_id for item in load_longmemeval(local_path=as_list, question_type=None)] == [
        "gpt4_2655b836"
    ]
    dates = [data.parse_longmemeval_date(session.date) for session in oracle_item.sessions]
    assert dates == sorted(dates) and len(dates) == 3
