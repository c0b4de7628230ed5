"""The persistent response cache: keys, hit/miss accounting, persistence, concurrent writers,
and a cached model that makes zero server calls on a rerun."""

import asyncio
import logging
import multiprocessing
import sqlite3
import threading

import pytest

from supersede_lib.models.cache import CacheCorruptError, CachedChatModel, ResponseCache, cache_key
from supersede_lib.models.chat import ChatModel, ChatResult
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


def test_cache_key_is_stable_and_sensitive_to_every_part():
    base = cache_key("openai", "m", MESSAGES, {"temperature": 0.0, "max_tokens": 5}, 0)
    assert base == cache_key("openai", "m", MESSAGES, {"max_tokens": 5, "temperature": 0.0}, 0)
    assert len(base) == 64
    variants = [
        cache_key("embedded", "m", MESSAGES, {"temperature": 0.0, "max_tokens": 5}, 0),
        cache_key("openai", "m2", MESSAGES, {"temperature": 0.0, "max_tokens": 5}, 0),
        cache_key("openai", "m", MESSAGES[::-1], {"temperature": 0.0, "max_tokens": 5}, 0),
        cache_key("openai", "m", MESSAGES, {"temperature": 0.7, "max_tokens": 5}, 0),
        cache_key("openai", "m", MESSAGES, {"temperature": 0.0, "max_tokens": 5}, 1),
    ]
    assert len({base, *variants}) == 6


def test_get_put_counts_and_persists_across_instances(tmp_path):
    path = tmp_path / "nested" / "responses.db"
    cache = ResponseCache(path)
    assert cache.get("k1") is None
    cache.put(
        "k1", ChatResult("stored text", prompt_tokens=10, completion_tokens=2, latency_s=1.5, model="m")
    )
    hit = cache.get("k1")
    assert hit.text == "stored text" and hit.prompt_tokens == 10 and hit.cached and hit.model == "m"
    assert (cache.hits, cache.misses) == (1, 1)
    assert cache.stats() == {"path": str(path), "entries": 1, "hits": 1, "misses": 1, "hit_rate": 0.5}

    reopened = ResponseCache(path)
    assert "k1" in reopened and len(reopened) == 1
    assert reopened.get("k1").text == "stored text"
    assert (reopened.hits, reopened.misses) == (1, 0)
    mode = reopened._connection().execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_threads_write_concurrently(tmp_path):
    cache = ResponseCache(tmp_path / "threads.db")

    def write(worker):
        for index in range(40):
            cache.put(f"t{worker}-{index}", ChatResult(f"reply {worker}/{index}"))

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 240
    assert cache.get("t5-39").text == "reply 5/39"


def _process_writer(cache, worker, count):
    # Uses the cache object inherited through fork: it must open its own connection.
    for index in range(count):
        cache.put(f"p{worker}-{index}", ChatResult(f"reply {worker}/{index}", completion_tokens=index))
        cache.get(f"p{(worker + 1) % 4}-{index}")  # readers interleaved with other writers


def test_processes_write_the_same_file_concurrently(tmp_path):
    cache = ResponseCache(tmp_path / "processes.db")
    cache.put("parent", ChatResult("from parent"))  # parent connection exists before the fork
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_process_writer, args=(cache, worker, 60)) for worker in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    assert len(ResponseCache(tmp_path / "processes.db")) == 4 * 60 + 1
    assert cache.get("p3-59").completion_tokens == 59
    assert cache.get("parent").text == "from parent"


def test_cached_model_makes_zero_server_calls_on_a_rerun(tmp_path):
    requests = [[{"role": "user", "content": f"question {index}"}] for index in range(5)]

    async def run_all(model):
        return await asyncio.gather(*(model.achat(messages, max_tokens=20) for messages in requests))

    with LocalOpenAIServer(
        latency_s=0.01, responder=lambda messages: messages[-1]["content"][::-1]
    ) as server:
        first_model = CachedChatModel(
            OpenAIChatModel("fake-model", base_url=server.base_url), ResponseCache(tmp_path / "c.db")
        )
        assert isinstance(first_model, ChatModel)
        first = asyncio.run(run_all(first_model))
        assert server.request_count == 5
        again = asyncio.run(run_all(first_model))
        # A fresh process resuming the run: new model, new cache object, same file.
        resumed_model = CachedChatModel(
            OpenAIChatModel("fake-model", base_url=server.base_url), ResponseCache(tmp_path / "c.db")
        )
        resumed = asyncio.run(run_all(resumed_model))
        assert server.request_count == 5
        different_params = asyncio.run(resumed_model.achat(requests[0], max_tokens=21))
        assert server.request_count == 6
    assert [result.text for result in first] == [f"{index} noitseuq" for index in range(5)]
    assert not any(result.cached for result in first)
    for cached_results in (again, resumed):
        assert [result.text for result in cached_results] == [result.text for result in first]
        assert all(result.cached and result.latency_s == 0.0 for result in cached_results)
    assert not different_params.cached
    assert (first_model.cache.hits, first_model.cache.misses) == (5, 5)
    assert (resumed_model.cache.hits, resumed_model.cache.misses) == (5, 1)


class CountingModel:
    """An inner model that records calls and can fail."""

    name = "counting"

    def __init__(self, fail=False):
        self.calls = 0
        self.fail = fail

    async def achat(self, messages, *, max_tokens=None, temperature=0.0, seed=0):
        self.calls += 1
        await asyncio.sleep(0.01)
        if self.fail:
            raise RuntimeError("backend down")
        return ChatResult(text=f"reply {seed}", latency_s=0.01, model=self.name)


def test_identical_requests_in_flight_share_one_call(tmp_path):
    inner = CountingModel()
    model = CachedChatModel(inner, ResponseCache(tmp_path / "d.db"))

    async def run_all():
        return await asyncio.gather(*(model.achat(MESSAGES, seed=1) for _ in range(5)))

    results = asyncio.run(run_all())
    assert inner.calls == 1 and model.deduplicated == 4
    assert [result.text for result in results] == ["reply 1"] * 5
    assert sum(result.cached for result in results) == 4
    assert model.backend == "CountingModel"


def test_failures_are_not_cached_and_reach_every_waiter(tmp_path):
    inner = CountingModel(fail=True)
    model = CachedChatModel(inner, ResponseCache(tmp_path / "f.db"))

    async def run_all():
        return await asyncio.gather(*(model.achat(MESSAGES) for _ in range(3)), return_exceptions=True)

    outcomes = asyncio.run(run_all())
    assert all(isinstance(outcome, RuntimeError) for outcome in outcomes)
    assert len(model.cache) == 0
    inner.fail = False
    assert asyncio.run(model.achat(MESSAGES)).text == "reply 0"
    assert inner.calls == 2


def test_seed_is_part_of_the_key(tmp_path):
    inner = CountingModel()
    model = CachedChatModel(inner, ResponseCache(tmp_path / "s.db"), backend="test")
    texts = [asyncio.run(model.achat(MESSAGES, seed=seed)).text for seed in (0, 1, 0)]
    assert texts == ["reply 0", "reply 1", "reply 0"] and inner.calls == 2


def test_a_folder_as_cache_path_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="is a folder"):
        ResponseCache(tmp_path)


def test_a_server_on_a_new_port_is_asked_and_a_namespace_shares_on_purpose(tmp_path):
    # Another port may be another model under the same name (tests/test_served_identity.py).
    cache_path = tmp_path / "ports.db"
    with LocalOpenAIServer(responder=lambda messages: "first server") as first_server:
        for namespace in (None, "lab-vllm"):
            model = OpenAIChatModel("m", base_url=first_server.base_url, cache_namespace=namespace)
            asyncio.run(CachedChatModel(model, ResponseCache(cache_path)).achat(MESSAGES))
    with LocalOpenAIServer(responder=lambda messages: "second server") as second_server:
        same = CachedChatModel(
            OpenAIChatModel("m", base_url=second_server.base_url), ResponseCache(cache_path)
        )
        again = asyncio.run(same.achat(MESSAGES))
        assert second_server.request_count == 1 and again.text == "second server"
        shared = OpenAIChatModel("m", base_url=second_server.base_url, cache_namespace="lab-vllm")
        replayed = asyncio.run(CachedChatModel(shared, ResponseCache(cache_path)).achat(MESSAGES))
        assert second_server.request_count == 1 and replayed.cached and replayed.text == "first server"


def test_settings_that_shape_the_reply_are_part_of_the_key(tmp_path):
    cache = ResponseCache(tmp_path / "keys.db")
    url = "http://127.0.0.1:9/v1"
    plain = CachedChatModel(OpenAIChatModel("m", base_url=url), cache)
    tuned = CachedChatModel(OpenAIChatModel("m", base_url=url, extra_params={"top_p": 0.5}), cache)
    args = (MESSAGES, 5, 0.0, 0)
    assert plain.key_for(*args) == cache_key(  # a server other than OpenAI's: its own namespace, and
        "openai-compatible",  # what served (nothing answers on port 9)
        "m",
        MESSAGES,
        {"max_tokens": 5, "temperature": 0.0},
        0,
        {"endpoint": url, "unreachable": True},
    )
    assert tuned.key_for(*args) != plain.key_for(*args)


def test_finish_reason_survives_the_cache_and_old_files_gain_the_column(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as connection:  # the layout before finish_reason existed
        connection.execute(
            "CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,"
            " completion_tokens INTEGER NOT NULL, latency_s REAL NOT NULL, model TEXT NOT NULL,"
            " created_at REAL NOT NULL)"
        )
        connection.execute("INSERT INTO responses VALUES ('old', 'kept', 1, 2, 0.5, 'm', 0)")
    cache = ResponseCache(path)
    assert cache.get("old").text == "kept" and cache.get("old").finish_reason is None
    cache.put("new", ChatResult(text="cu", finish_reason="length"))
    assert ResponseCache(path).get("new").was_cut


@pytest.mark.parametrize(
    "content", [b"this is not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000]
)
def test_a_corrupted_cache_file_is_named_with_the_way_out(tmp_path, content):
    path = tmp_path / "responses.db"
    path.write_bytes(content)
    with pytest.raises(CacheCorruptError) as raised:
        ResponseCache(path)
    message = str(raised.value)
    assert str(path) in message and "move it aside" in message and "delete it" in message
    assert "\n" not in message


def _damage_pages(path, keep_pages=2):
    """Overwrite every page after the first `keep_pages` with garbage (a damaged disk image)."""
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    for offset in range(keep_pages * page_size, len(data), page_size):
        data[offset : offset + page_size] = b"\xa5" * page_size
    path.write_bytes(bytes(data))


def damaged_after_opening(path, inner, **options) -> CachedChatModel:
    """A cached model whose file opens fine (the first pages are intact) and is damaged after."""
    cache = ResponseCache(path)
    for index in range(300):
        cache.put(f"filler-{index}", ChatResult(text="x" * 500))
    cache.close()
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    model = CachedChatModel(inner, ResponseCache(path), **options)
    _damage_pages(path)
    return model


def _damaged_mid_run_model(path, **options):
    inner = CountingModel()
    return inner, damaged_after_opening(path, inner, **options)


def test_a_cache_damaged_mid_run_stops_with_the_file_and_the_way_out(tmp_path):
    path = tmp_path / "damaged.db"
    inner, model = _damaged_mid_run_model(path)
    with pytest.raises(CacheCorruptError) as raised:
        asyncio.run(model.achat(MESSAGES, seed=0))
    assert str(path) in str(raised.value) and "move it aside" in str(raised.value)
    assert inner.calls == 0  # nothing is paid for that could not be kept
    with pytest.raises(CacheCorruptError):  # and it stays stopped
        asyncio.run(model.achat(MESSAGES, seed=1))


def test_a_cache_damaged_mid_run_may_run_uncached_when_allowed_with_honest_stats(tmp_path, caplog):
    path = tmp_path / "damaged.db"
    inner, model = _damaged_mid_run_model(path, on_damage="run_uncached")
    with caplog.at_level(logging.WARNING):
        results = [asyncio.run(model.achat(MESSAGES, seed=seed)) for seed in range(3)]
    assert [result.text for result in results] == ["reply 0", "reply 1", "reply 2"]
    assert inner.calls == 3 and model.disabled and str(path) in model.disabled
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0] and "without the cache" in warnings[0]
    stats = model.stats()
    assert stats["disabled"] and stats["hit_rate"] == 0.0 and stats["hits"] == 0
    assert stats["misses"] == 3 and stats["bypassed"] == 3  # the call that found the damage counts too
    with pytest.raises(ValueError, match="on_damage"):
        CachedChatModel(inner, ResponseCache(tmp_path / "other.db"), on_damage="ignore")


class EmptyThenModel(CountingModel):
    """Answers with an empty reply for the first `empty_calls` calls, then with text."""

    def __init__(self, empty_calls):
        super().__init__()
        self.empty_calls = empty_calls

    async def achat(self, messages, *, max_tokens=None, temperature=0.0, seed=0):
        self.calls += 1
        text = "" if self.calls <= self.empty_calls else f"reply {seed}"
        return ChatResult(text=text, model=self.name, finish_reason="stop")


def test_an_empty_reply_is_asked_again_by_the_next_run_and_final_only_when_repeated(tmp_path):
    path = tmp_path / "empty.db"
    transient = EmptyThenModel(empty_calls=1)
    assert asyncio.run(CachedChatModel(transient, ResponseCache(path)).achat(MESSAGES)).text == ""
    rerun = CachedChatModel(transient, ResponseCache(path))
    assert asyncio.run(rerun.achat(MESSAGES)).text == "reply 0"  # asked again, not replayed
    assert asyncio.run(CachedChatModel(transient, ResponseCache(path)).achat(MESSAGES)).cached
    assert transient.calls == 2

    path = tmp_path / "always_empty.db"
    always = EmptyThenModel(empty_calls=10)
    for _ in range(2):
        assert asyncio.run(CachedChatModel(always, ResponseCache(path)).achat(MESSAGES)).text == ""
    replayed = asyncio.run(CachedChatModel(always, ResponseCache(path)).achat(MESSAGES))
    assert replayed.cached and replayed.text == "" and always.calls == 2  # a repeated empty reply is final


def _shared_cache_worker(path, base_url, barrier, texts):
    barrier.wait()
    model = CachedChatModel(OpenAIChatModel("fake-model", base_url=base_url), ResponseCache(path))
    requests = [[{"role": "user", "content": f"question {index}"}] for index in range(12)]

    async def run_all():
        return await asyncio.gather(*(model.achat(messages, max_tokens=20) for messages in requests))

    texts.extend([result.text for result in asyncio.run(run_all())])


def test_processes_sharing_one_cache_never_pay_for_the_same_call_twice(tmp_path):
    context = multiprocessing.get_context("fork")
    with LocalOpenAIServer(latency_s=0.2, responder=lambda messages: messages[-1]["content"][::-1]) as server:
        barrier, texts = context.Barrier(3), context.Manager().list()
        workers = [
            context.Process(
                target=_shared_cache_worker, args=(tmp_path / "shared.db", server.base_url, barrier, texts)
            )
            for _ in range(3)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert [worker.exitcode for worker in workers] == [0, 0, 0]
        assert server.request_count == 12  # three processes, twelve questions each, each paid once
    assert sorted(texts) == sorted([f"question {index}"[::-1] for index in range(12)] * 3)


def test_a_reply_with_a_lone_surrogate_can_be_stored(tmp_path):
    cache = ResponseCache(tmp_path / "surrogate.db")
    cache.put("k", ChatResult(text="abc\ud83d"))
    assert cache.get("k").text == "abc\ufffd"


def test_recorded_responses_export_import_round_trip_and_are_byte_stable(tmp_path):
    cache = ResponseCache(tmp_path / "a.db")
    cache.put(
        "k2", ChatResult("second", prompt_tokens=3, model="m", finish_reason="stop"), made_by_commit="abc"
    )
    cache.put("k1", ChatResult("first \u00e9", completion_tokens=4, model="m", finish_reason="length"))
    assert cache.export_responses(tmp_path / "rec.jsonl.gz") == 2
    first_bytes = (tmp_path / "rec.jsonl.gz").read_bytes()
    cache.export_responses(tmp_path / "rec.jsonl.gz")
    assert (tmp_path / "rec.jsonl.gz").read_bytes() == first_bytes  # no timestamps: a commit stays clean

    fresh = ResponseCache(tmp_path / "b.db")
    fresh.put("k1", ChatResult("already here", model="m"))
    assert fresh.import_responses(tmp_path / "rec.jsonl.gz") == 1  # existing rows win
    assert fresh.get("k1").text == "already here"
    replayed = fresh.get("k2")
    assert replayed.text == "second" and replayed.finish_reason == "stop" and replayed.made_by_commit == "abc"


def test_a_broken_recorded_responses_file_is_named(tmp_path):
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="bad.jsonl.gz"):
        ResponseCache(tmp_path / "c.db").import_responses(tmp_path / "bad.jsonl.gz")


def test_replay_off_makes_every_call_live_and_records_the_commit(tmp_path):
    cache = ResponseCache(tmp_path / "live.db")
    inner = CountingModel()
    asyncio.run(CachedChatModel(inner, cache, commit="c1").achat(MESSAGES))
    live = CachedChatModel(inner, cache, replay=False, commit="c2")
    result = asyncio.run(live.achat(MESSAGES))
    assert not result.cached and inner.calls == 2
    replayed = asyncio.run(CachedChatModel(inner, cache).achat(MESSAGES))
    assert replayed.cached and replayed.made_by_commit == "c2" and inner.calls == 2


def test_a_zero_length_cache_file_stops_with_the_way_out_instead_of_paying_every_call_again(tmp_path) -> None:
    from supersede_lib.models.cache import CacheCorruptError, ResponseCache

    path = tmp_path / "responses.sqlite"
    path.write_bytes(b"")
    with pytest.raises(CacheCorruptError, match=r"empty \(0 bytes\).*move it aside"):
        ResponseCache(path)
