"""readers.py: the base reader always, a folder reader when its adapter and card are there, clear errors otherwise."""

import json

import pytest

from raqa.config import RunSettings
from raqa.reading.readers import BASE_READER, READERS_DIR, ReaderError, available_readers, load_reader


def make_reader(root, name="abstain", card=None, files=("adapter_config.json", "adapter_model.safetensors")):
    folder = root / name
    folder.mkdir(parents=True)
    for file in files:
        (folder / file).write_text("{}")
    if card is not None:
        (folder / "raqa_reader.json").write_text(card if isinstance(card, str) else json.dumps(card))
    return folder


def test_no_folder_means_only_the_base_reader(tmp_path):
    assert available_readers(tmp_path / "missing") == [BASE_READER]
    assert BASE_READER.adapter is None and BASE_READER.answer_threshold == 0.5


def test_a_complete_folder_is_a_reader_and_sets_the_run_settings(tmp_path):
    make_reader(tmp_path, card={"label": "Tuned", "answer_threshold": 0.8, "shots": 2, "page_tokens": 320})
    (tmp_path / "notes").mkdir()  # a folder without adapter or card is not a reader
    base, tuned = available_readers(tmp_path)
    assert base == BASE_READER
    assert (tuned.name, tuned.label, tuned.answer_threshold, tuned.adapter) == (
        "abstain",
        "Tuned",
        0.8,
        tmp_path / "abstain",
    )
    settings = tuned.settings(RunSettings(window=5))
    assert (settings.answer_threshold, settings.shots, settings.page_tokens, settings.window) == (0.8, 2, 320, 5)


@pytest.mark.parametrize(
    ("card", "message"),
    [
        ("{not json", "not readable JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({"answer_threshold": 1.5, "shots": 2, "page_tokens": 320}, "'answer_threshold' must be a number from 0 to 1"),
        ({"answer_threshold": "high", "shots": 2, "page_tokens": 320}, "'answer_threshold' must be a number"),
        ({"answer_threshold": 0.5, "shots": 2.5, "page_tokens": 320}, "'shots' must be a whole number from 0 to 8"),
        ({"answer_threshold": 0.5, "shots": 2}, "'page_tokens' must be a whole number"),
        ({"answer_threshold": 0.5, "shots": 2, "page_tokens": 320, "label": ""}, "'label' must be a non-empty string"),
    ],
)
def test_a_malformed_card_is_a_clear_error_naming_the_file(tmp_path, card, message):
    make_reader(tmp_path, card=card)
    with pytest.raises(ReaderError, match=message) as error:
        available_readers(tmp_path)
    assert "raqa_reader.json" in str(error.value)


def test_a_folder_missing_its_adapter_says_which_file(tmp_path):
    make_reader(
        tmp_path, card={"answer_threshold": 0.5, "shots": 2, "page_tokens": 320}, files=("adapter_config.json",)
    )
    with pytest.raises(ReaderError, match="needs adapter_model.safetensors"):
        load_reader(tmp_path / "abstain")


@pytest.mark.skipif(not (READERS_DIR / "abstain").is_dir(), reason="no committed reader")
def test_the_committed_reader_loads_with_a_calibrated_threshold():
    reader = load_reader(READERS_DIR / "abstain")
    assert 0.0 <= reader.answer_threshold <= 1.0
    assert (reader.adapter / "README.md").is_file()
