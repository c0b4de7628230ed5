"""Profiles: every committed configs/*.yaml validates, and a mistake fails with one line naming the file,
the key path and what is allowed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from supersede_lib import profiles
from supersede_lib.agent.settings import PAPER_NOTES_BUDGET_CHARS
from supersede_lib.cli import reproduce as reproduce_cli
from supersede_lib.data.episodes import EpisodeSpec, load_episodes
from supersede_lib.eval.runner import DEFAULT_CONCURRENCY
from supersede_lib.models.cache import ResponseCache
from supersede_lib.profiles import Profile, ProfileError, load_profile

COMMITTED = sorted(profiles.CONFIG_DIR.glob("*.yaml"))
MINIMAL = "name: unit\nmodel: {backend: fake}\n"


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as raised:
        load_profile(path)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{path}:"), message
    return message


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.name)
def test_every_committed_profile_validates(path: Path) -> None:
    profile = load_profile(path)
    assert isinstance(profile, Profile) and profile.name == path.stem
    assert profile.source == f"configs/{path.name}"
    sections = ("isolation", "frontier", "scale", "environment", "saturation", "training", "transfer")
    if profile.name in (
        "colab",
        "cpu_proof",
        "cpu_proof_prereg",
    ):  # notebooks 06-07 only (one Colab session; the CPU proof)
        sections = ("training", "transfer")
    for section in sections:
        assert profile.require(section) is not None, section


def test_committed_profiles_are_the_named_ones() -> None:
    assert {path.stem for path in COMMITTED} == set(profiles.PROFILES)


def test_defaults_come_from_the_runner_and_the_paper(tmp_path: Path) -> None:
    path = tmp_path / "defaults.yaml"
    path.write_text(MINIMAL + "isolation: {episodes: {n: 2}}\n")
    profile = load_profile(path)
    assert profile.concurrency == DEFAULT_CONCURRENCY
    assert profile.isolation.notes_budget_chars == PAPER_NOTES_BUDGET_CHARS
    assert profile.isolation.episodes == EpisodeSpec(n=2)


def test_profile_is_frozen_and_overrides_merge_before_validation() -> None:
    profile = load_profile("smoke", {"isolation": {"notes_budget_chars": 120}})
    assert profile.isolation.notes_budget_chars == 120 and profile.isolation.episodes.n == 4
    with pytest.raises(ValueError):
        profile.concurrency = 2
    with pytest.raises(ProfileError, match=r"configs/smoke.yaml: isolation.notes_budget_chars: must be >= 1"):
        load_profile("smoke", {"isolation": {"notes_budget_chars": 0}})


def test_unknown_key_in_a_block_names_it_and_what_is_allowed(tmp_path: Path) -> None:
    message = _error(tmp_path, MINIMAL + "isolation:\n  episodes: {n: 2}\n  notes_budget_char: 50\n")
    assert message.endswith(
        "typo.yaml: isolation.notes_budget_char: unknown key "
        "(allowed: episodes, notes_budget_chars, max_tokens_notes, max_tokens_answer, memory)"
    )


def test_unknown_top_level_keys(tmp_path: Path) -> None:
    message = _error(tmp_path, MINIMAL + "concurency: 4\n")
    assert (
        "concurency: unknown key (allowed: name, description, data_label, model, judge, concurrency"
        in message
    )
    message = _error(tmp_path, MINIMAL + "isolaton: {episodes: {n: 2}}\n")
    assert "isolaton: unknown key (allowed:" in message and "isolation" in message


def test_bad_values_say_what_is_allowed(tmp_path: Path) -> None:
    message = _error(tmp_path, MINIMAL + "isolation: {episodes: {n: 0}}\n")
    assert message.endswith("isolation.episodes.n: must be >= 1 (got 0)")
    message = _error(tmp_path, MINIMAL + 'isolation: {episodes: {n: "3"}}\n')
    assert message.endswith("isolation.episodes.n: must be an integer (got '3')")
    message = _error(tmp_path, MINIMAL + "concurrency: 0\n")
    assert message.endswith("concurrency: must be >= 1 (got 0)")
    message = _error(tmp_path, MINIMAL + "scale: {short: {n: 2}, long: {n: 2, difficulty: hardest}}\n")
    assert "scale.long.difficulty: must be one of 'easy', 'medium'" in message
    message = _error(tmp_path, MINIMAL + "training: {preset: smoke, overrides: {learning_rat: 0.1}}\n")
    assert "training.overrides: unknown TrainingConfig field(s) learning_rat" in message
    message = _error(tmp_path, MINIMAL + "training: {preset: smoke, rewards: [sparse, dense]}\n")
    assert message.endswith(
        "training.rewards[1]: must be one of 'sparse', 'memory', 'notes_used' or 'format' (got 'dense')"
    )
    message = _error(
        tmp_path, MINIMAL + "training: {preset: smoke, rewards: [memory], overrides: {reward: memory}}\n"
    )
    assert "training.overrides: reward: chosen by training.rewards" in message
    message = _error(tmp_path, "description: no name\nmodel: {}\n")
    assert message.endswith("name: missing (required)")


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    message = _error(tmp_path, MINIMAL + "isolation: {episodes: {n: 2}\n")
    assert "line 4" in message and "YAML syntax error" in message


def test_missing_section_fails_when_a_study_asks_for_it(tmp_path: Path) -> None:
    path = tmp_path / "partial.yaml"
    path.write_text(MINIMAL)
    profile = load_profile(path)
    with pytest.raises(ProfileError, match=r"partial.yaml: scale: missing"):
        profile.require("scale")


def test_unknown_profile_names_the_choices() -> None:
    with pytest.raises(ProfileError, match="no profile 'nope'.*smoke, offline, local, paper"):
        load_profile("nope")


def test_episode_spec_keeps_generator_overrides_beside_its_keys() -> None:
    spec = EpisodeSpec.model_validate({"n": 3, "difficulty": "hard", "seed": 1001, "n_sessions": [4, 5]})
    assert spec.generator_overrides == {"n_sessions": [4, 5]}
    assert spec.model_dump(exclude_unset=True) == {
        "n": 3,
        "difficulty": "hard",
        "seed": 1001,
        "n_sessions": [4, 5],
    }
    episodes = load_episodes(spec)
    assert len(episodes) == 3 and all(4 <= len(episode.sessions) <= 5 for episode in episodes)
    assert [episode.episode_id for episode in load_episodes(spec.model_dump())] == [
        episode.episode_id for episode in episodes
    ]
    longer = load_episodes({"n": 2, "difficulty": "easy", "extra_distractor_sessions": 3})
    base = load_episodes({"n": 2, "difficulty": "easy"})
    assert [len(episode.sessions) for episode in longer] == [len(episode.sessions) + 3 for episode in base]
    assert EpisodeSpec(source="longmemeval", split="s").label == "LongMemEval knowledge-update, s"


def test_recorded_responses_are_replayed_on_a_fresh_cache_and_live_calls_can_be_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path / "outputs")
    monkeypatch.setattr(profiles, "_imported_recordings", set())
    monkeypatch.setattr(profiles, "REPO_ROOT", tmp_path)  # a profile's paths stay inside the repository
    path = tmp_path / "rec.yaml"
    path.write_text(MINIMAL + "recorded_responses: recorded.jsonl.gz\n")
    profile = load_profile(path)
    messages = [{"role": "user", "content": "hello"}]

    first = profiles.model_for({"backend": "fake"}, profile)
    made = asyncio.run(first.achat(messages))
    assert not made.cached
    assert profiles.save_recorded_responses(profile) == 1

    # a fresh clone: no cache file yet, only the committed recording
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path / "clone")
    monkeypatch.setattr(profiles, "_imported_recordings", set())
    replayed = asyncio.run(profiles.model_for({"backend": "fake"}, profile).achat(messages))
    assert replayed.cached and replayed.text == made.text
    assert len(ResponseCache(profiles.cache_path(profile))) == 1

    monkeypatch.setenv(profiles.LIVE_CALLS_ENV, "1")
    live = asyncio.run(profiles.model_for({"backend": "fake"}, profile).achat(messages))
    assert not live.cached


def test_save_responses_carries_an_unfinished_runs_paid_calls_into_the_committed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path / "outputs")
    monkeypatch.setattr(profiles, "_imported_recordings", set())
    monkeypatch.setattr(profiles, "REPO_ROOT", tmp_path)
    path = tmp_path / "rec.yaml"
    assert reproduce_cli.main(["--profile", str(tmp_path / "missing.yaml"), "--save-responses"]) == 2
    path.write_text(MINIMAL)
    assert reproduce_cli.main(["--profile", str(path), "--save-responses"]) == 2
    assert "keeps no recorded responses" in capsys.readouterr().err
    path.write_text(MINIMAL + "recorded_responses: recorded.jsonl.gz\n")
    assert reproduce_cli.main(["--profile", str(path), "--save-responses"]) == 0
    assert "no local response cache" in capsys.readouterr().out
    assert not (tmp_path / "recorded.jsonl.gz").exists()

    profile = load_profile(path)
    asyncio.run(profiles.model_for({"backend": "fake"}, profile).achat([{"role": "user", "content": "hi"}]))
    assert reproduce_cli.main(["--profile", str(path), "--save-responses"]) == 0
    assert "1 replies -> recorded.jsonl.gz" in capsys.readouterr().out
    assert ResponseCache(tmp_path / "fresh.sqlite").import_responses(tmp_path / "recorded.jsonl.gz") == 1


BASE_PROFILE = {"name": "x", "model": {"backend": "fake"}}
BAD_PROFILES = [
    ({"name": "../../.."}, "name: must be a plain name"),
    ({"concurrency": 10**9}, "concurrency: must be <= 256"),
    ({"isolation": {"episodes": {"source": "synthetic", "n": 2}, "notes_budget_chars": 10**12}}, "<= 100000"),
    (
        {"training": {"preset": "smoke", "overrides": {"learning_rate": "fast"}}},
        "learning_rate must be a number",
    ),
    ({"training": {"preset": "smoke", "overrides": {"learning_rate": -1}}}, "learning_rate must be a number"),
    ({"training": {"preset": "smoke", "overrides": {"max_steps": -5}}}, "max_steps must be a number"),
    ({"model": {"backend": "openai", "model": "m", "timeout_s": -1}}, "model: timeout_s must be a number"),
    (
        {"model": {"backend": "embedded", "model_fle": "x.gguf"}},
        "model: model spec for backend 'embedded' has unknown",
    ),
    (
        {
            "frontier": {
                "episodes": {"source": "synthetic", "n": 2},
                "models": [{"model": "m", "max_retries": 999}],
            }
        },
        "frontier.models[0]: max_retries must be a number",
    ),
    ({"name": "evil\n"}, "name: must be a plain name"),  # `$` would let the newline into outputs/
    (
        {"model": {"backend": "openai", "model": "m", "max_retries": 2.5}},
        "model: max_retries must be an integer",
    ),
    ({"model": {"backend": "embedded", "n_ctx": 4096.0}}, "model: n_ctx must be an integer"),
    ({"training": {"preset": "smoke", "overrides": {"max_steps": 2.5}}}, "max_steps must be an integer"),
    (
        {"training": {"preset": "smoke", "arms": [{"name": "a", "overrides": {"num_generations": 4.0}}]}},
        "num_generations must be an integer",
    ),
    (
        {"transfer": {"evaluations": [{"name": "e", "episodes": {"n": 2}, "max_tokens_answer": 64.0}]}},
        "transfer.evaluations[0].max_tokens_answer: must be an integer",
    ),
    (
        {"isolation": {"episodes": {"n": 2}, "max_tokens_notes": 100.5}},
        "isolation.max_tokens_notes: must be an integer",
    ),
    ({"cache_path": "../outside/c.sqlite"}, "cache_path: '../outside/c.sqlite' lies outside the repository"),
    ({"cache_path": "/tmp/elsewhere/c.sqlite"}, "cache_path: '/tmp/elsewhere/c.sqlite' lies outside"),
    (
        {"recorded_responses": "outputs/../../outside/r.jsonl.gz"},
        "recorded_responses: 'outputs/../../outside/r.jsonl.gz' lies outside the repository",
    ),
    (
        {"model": {"backend": "openai", "model": "m", "cache_path": "../outside/c.db"}},
        "model: cache_path: '../outside/c.db' lies outside the repository",
    ),
]


@pytest.mark.parametrize(("change", "expected"), BAD_PROFILES, ids=[expected for _, expected in BAD_PROFILES])
def test_out_of_bounds_values_names_and_model_keys_are_refused_when_read(change: dict, expected: str) -> None:
    with pytest.raises(profiles.ProfileError) as raised:
        profiles.validate_profile({**BASE_PROFILE, **change}, "configs/x.yaml")
    assert str(raised.value).startswith("configs/x.yaml: ") and expected in str(raised.value)


def test_a_relative_cache_path_is_the_repositorys_wherever_the_run_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # notebooks run in notebooks/: the path must not follow the cwd
    profile = profiles.validate_profile({**BASE_PROFILE, "cache_path": ".replay/test-cache/r.sqlite"}, "<t>")
    assert profiles.cache_path(profile) == profiles.REPO_ROOT / ".replay" / "test-cache" / "r.sqlite"
    inside = profiles.REPO_ROOT / ".replay" / "test-cache" / "a.sqlite"
    absolute = profiles.validate_profile({**BASE_PROFILE, "cache_path": str(inside)}, "<t>")
    assert profiles.cache_path(absolute, create=False) == inside


def test_a_path_outside_the_repository_is_refused_before_any_folder_is_made(tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "cache" / "r.sqlite"
    for key in ("cache_path", "recorded_responses"):
        with pytest.raises(
            profiles.ProfileError, match=f"^configs/x.yaml: {key}: .* lies outside the repository"
        ):
            profiles.validate_profile({**BASE_PROFILE, key: str(outside)}, "configs/x.yaml")
    assert not (tmp_path / "outside").exists()


def test_a_profile_builds_each_runs_settings_in_one_place() -> None:
    profile = load_profile("offline")
    settings = profile.run_settings(notes_budget_chars=120)
    assert (settings.concurrency, settings.prompt_variant) == (profile.concurrency, profile.prompt_variant)
    assert settings.notes_budget_chars == 120
    assert profile.run_settings().notes_budget_chars == PAPER_NOTES_BUDGET_CHARS
