"""Settings validation and question cleaning: the limits and messages shared by the UI, the CLI and the API."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from raqa.config import (
    MAX_QUESTION_CHARS,
    AppConfig,
    RunForm,
    RunSettings,
    ServerConfig,
    SettingsError,
    clean_question,
    default_cache_dir,
    secret,
    validate_settings,
)


def test_defaults_match_run_settings() -> None:
    assert validate_settings() == RunSettings()


def test_docstring_example() -> None:
    settings = validate_settings(RunForm("iterative", "backward", 2, 10))
    assert (settings.strategy, settings.order, settings.window, settings.k) == ("iterative", "backward", 2, 10)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("window", 1, 1),
        ("window", 20, 20),
        ("window", "5", 5),
        ("window", " 7 ", 7),
        ("window", "4.0", 4),
        ("window", 6.0, 6),
        ("k", 5, 5),
        ("k", 100, 100),
        ("k", "5", 5),
        ("k", "1e1", 10),
    ],
)
def test_whole_numbers_are_coerced(name: str, value: object, expected: int) -> None:
    settings = validate_settings(RunForm(**{name: value}))
    assert getattr(settings, name) == expected
    assert type(getattr(settings, name)) is int


@pytest.mark.parametrize(
    ("name", "value", "limits"),
    [
        ("window", 0, "from 1 to 20"),
        ("window", 21, "from 1 to 20"),
        ("window", -3, "from 1 to 20"),
        ("window", "abc", "from 1 to 20"),
        ("window", "", "from 1 to 20"),
        ("window", 3.5, "from 1 to 20"),
        ("window", "2.5", "from 1 to 20"),
        ("window", True, "from 1 to 20"),
        ("window", False, "from 1 to 20"),
        ("window", float("nan"), "from 1 to 20"),
        ("window", "nan", "from 1 to 20"),
        ("window", float("inf"), "from 1 to 20"),
        ("window", "1e400", "from 1 to 20"),
        ("window", None, "from 1 to 20"),
        ("window", [3], "from 1 to 20"),
        ("k", 4, "from 5 to 100"),
        ("k", 101, "from 5 to 100"),
        ("k", "abc", "from 5 to 100"),
        ("k", 3.5, "from 5 to 100"),
        ("k", True, "from 5 to 100"),
        ("k", float("nan"), "from 5 to 100"),
    ],
)
def test_bad_numbers_are_rejected_with_the_allowed_range(name: str, value: object, limits: str) -> None:
    with pytest.raises(SettingsError) as error:
        validate_settings(RunForm(**{name: value}))
    message = str(error.value)
    assert limits in message
    assert repr(value) in message
    assert ("window size" if name == "window" else "K") in message


def test_huge_integer_is_a_settings_error() -> None:
    with pytest.raises(SettingsError):
        validate_settings(RunForm(window=10**400))


@pytest.mark.parametrize(
    ("name", "value", "choices"),
    [
        ("strategy", "topK", "iterative, topk"),
        ("strategy", None, "iterative, topk"),
        ("order", "reverse", "forward, backward"),
        ("order", "", "forward, backward"),
        ("retrieval", "dense", "hybrid, bm25"),
    ],
)
def test_bad_choices_list_the_valid_ones(name: str, value: object, choices: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(f"Invalid {name}: {value!r}. Choose from: {choices}.")):
        validate_settings(RunForm(**{name: value}))


@pytest.mark.parametrize("name", ["grounded_only", "rationale"])
@pytest.mark.parametrize("value", ["true", 1, None])
def test_flags_must_be_booleans(name: str, value: object) -> None:
    with pytest.raises(SettingsError, match="must be true or false"):
        validate_settings(RunForm(**{name: value}))


def test_flags_are_kept() -> None:
    settings = validate_settings(RunForm(strategy="topk", order="backward", grounded_only=True, rationale=True))
    assert (settings.strategy, settings.order, settings.grounded_only, settings.rationale) == (
        "topk",
        "backward",
        True,
        True,
    )


def test_settings_error_is_a_value_error() -> None:
    assert issubclass(SettingsError, ValueError)


def test_run_settings_are_frozen_and_replace_returns_a_copy() -> None:
    settings = RunSettings()
    changed = settings.replace(window=5)
    assert (settings.window, changed.window) == (RunSettings.window, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.window = 4  # type: ignore[misc]


@pytest.mark.parametrize("question", ["", " ", "   \n\t  ", "\x00\x07", "\u200b"])
def test_empty_questions_are_rejected(question: str) -> None:
    with pytest.raises(SettingsError, match="it is empty"):
        clean_question(question)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Who painted the Mona Lisa?", "Who painted the Mona Lisa?"),
        ("  Who painted\tthe   Mona\nLisa?  ", "Who painted the Mona Lisa?"),
        ("Who\x00painted\x07 the\x1b Mona Lisa?", "Who painted the Mona Lisa?"),
        ("Who painted\u200b the Mona Lisa?\r\n", "Who painted the Mona Lisa?"),
    ],
)
def test_control_characters_are_removed_and_spaces_folded(question: str, expected: str) -> None:
    assert clean_question(question) == expected


@pytest.mark.parametrize(
    "question",
    [
        "¿Quién pintó la Mona Lisa?",
        "Wer malte die Mona Lisa?",
        "谁画了蒙娜丽莎？",
        "Кто написал «Мону Лизу»?",
        "モナ・リザを描いたのは誰ですか",
        "من رسم الموناليزا؟",
        "Who painted it? 🎨",
    ],
)
def test_non_english_questions_are_kept(question: str) -> None:
    assert clean_question(question) == question


def test_a_question_at_the_limit_is_accepted() -> None:
    question = "a" * MAX_QUESTION_CHARS
    assert clean_question(question) == question


def test_the_limit_applies_after_folding_white_space() -> None:
    assert clean_question("Mona" + " " * 5000 + "Lisa") == "Mona Lisa"


@pytest.mark.parametrize(("length", "shown"), [(MAX_QUESTION_CHARS + 1, "1,001"), (100_000, "100,000")])
def test_long_questions_are_rejected_with_their_length_and_the_limit(length: int, shown: str) -> None:
    with pytest.raises(SettingsError) as error:
        clean_question("a" * length)
    assert str(error.value) == f"The question is {shown} characters long; the limit is 1,000."


@pytest.mark.parametrize(("value", "type_name"), [(None, "NoneType"), (42, "int"), (b"Mona Lisa", "bytes")])
def test_questions_must_be_text(value: object, type_name: str) -> None:
    with pytest.raises(SettingsError, match=f"must be text, got {type_name}"):
        clean_question(value)


def test_app_config_reads_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAQA_CORPUS", "pages.jsonl")
    monkeypatch.setenv("RAQA_MODEL", "model.gguf")
    monkeypatch.setenv("RAQA_ADAPTER", "")
    monkeypatch.setenv("RAQA_CACHE", str(tmp_path))
    config = AppConfig.from_env()
    assert config == AppConfig(corpus="pages.jsonl", model="model.gguf", adapter=None, cache_dir=tmp_path)
    assert default_cache_dir() == tmp_path


def test_app_config_overrides_win_unless_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAQA_CORPUS", "pages.jsonl")
    monkeypatch.setenv("RAQA_MODEL", "model.gguf")
    monkeypatch.delenv("RAQA_ADAPTER", raising=False)
    config = AppConfig.from_env(corpus="other.jsonl", model=None, cache_dir=str(tmp_path / "c"))
    assert (config.corpus, config.model, config.adapter) == ("other.jsonl", "model.gguf", None)
    assert config.cache_dir == tmp_path / "c"
    assert isinstance(config.cache_dir, Path)


def test_default_cache_dir_without_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAQA_CACHE", raising=False)
    assert default_cache_dir() == Path.home() / ".cache" / "raqa"


SERVER_VARIABLES = ("GRADIO_SERVER_NAME", "GRADIO_SERVER_PORT", "PORT", "SPACE_ID")


@pytest.mark.parametrize(
    ("env", "name", "port"),
    [
        ({}, "0.0.0.0", 7860),
        ({"PORT": "8080"}, "0.0.0.0", 8080),  # a host that only sets PORT
        ({"GRADIO_SERVER_PORT": "9000"}, "0.0.0.0", None),  # Gradio reads its own variable
        ({"GRADIO_SERVER_PORT": "9000", "PORT": "8080"}, "0.0.0.0", None),  # Gradio's variable wins over PORT
        ({"GRADIO_SERVER_NAME": "127.0.0.1"}, None, 7860),
        ({"GRADIO_SERVER_NAME": "127.0.0.1", "PORT": " 8081 "}, None, 8081),
        ({"GRADIO_SERVER_NAME": "", "GRADIO_SERVER_PORT": "", "PORT": ""}, "0.0.0.0", 7860),  # empty = unset
    ],
)
def test_server_config_leaves_gradios_variables_to_gradio(monkeypatch, env: dict, name, port) -> None:
    for variable in SERVER_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    assert ServerConfig.from_env() == ServerConfig.from_env(env) == ServerConfig(name=name, port=port)


@pytest.mark.parametrize("value", ["abc", "0", "65536", "-1", "80.5"])
def test_a_bad_port_is_named(value: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"PORT must be a port number from 1 to 65535, got {value!r}.")):
        ServerConfig.from_env({"PORT": value})


def test_a_bad_port_is_ignored_when_gradio_has_its_own() -> None:
    assert ServerConfig.from_env({"PORT": "abc", "GRADIO_SERVER_PORT": "9000"}).port is None


def test_spaces_are_recognised_by_space_id() -> None:
    assert ServerConfig.from_env({"SPACE_ID": "user/raqa"}).on_spaces
    assert not ServerConfig.from_env({}).on_spaces


def test_secrets_are_read_here(monkeypatch) -> None:
    monkeypatch.setenv("RAQA_TEST_SECRET", "sk-123")
    assert secret("RAQA_TEST_SECRET") == "sk-123"
    monkeypatch.setenv("RAQA_TEST_SECRET", "")
    assert secret("RAQA_TEST_SECRET") is None
    monkeypatch.delenv("RAQA_TEST_SECRET")
    assert secret("RAQA_TEST_SECRET") is None


def test_decode_weights_come_from_the_option_else_raqa_weights_and_a_bad_value_is_refused(monkeypatch) -> None:
    from raqa.config import AppConfig, SpeedOptions

    monkeypatch.delenv("RAQA_WEIGHTS", raising=False)
    assert AppConfig.from_env().speed == SpeedOptions()
    assert AppConfig.from_env().speed.weights == "int4"
    monkeypatch.setenv("RAQA_WEIGHTS", "fp32")
    assert AppConfig.from_env().speed == SpeedOptions.exact()
    assert AppConfig.from_env(weights="int4").speed.weights == "int4"
    monkeypatch.setenv("RAQA_WEIGHTS", "int3")
    with pytest.raises(ValueError, match="RAQA_WEIGHTS must be one of int4, fp32"):
        AppConfig.from_env()
