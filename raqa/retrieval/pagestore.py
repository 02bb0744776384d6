"""Pages of a large JSONL or KILT file, read from disk on demand.

`PageStore.open` scans the file once, checking every line as the in-memory loaders do, and keeps only
each record's byte offset (8 bytes a page) and a 64-bit hash of its id to check uniqueness; the offset
table is cached next to the index. `store[i]` reads and parses one line with `os.pread`, so threads
can share a store. A 5.9 M-page KILT file costs about 47 MB of offsets instead of tens of GB of text.
Left out: editing the file while a store is open (the cache key is the file's path, size and mtime,
so a changed file gets a new table on the next open).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from raqa.retrieval.atomic import BuildProgress, replace_folder
from raqa.retrieval.corpus import CorpusError, Page, page_from_record, parse_line, sniff_format


def _id_hash(page_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(page_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def file_key(path: Path) -> str:
    """What identifies one version of a corpus file: its absolute path, size and modification time."""
    stat = path.stat()
    return hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]


def scan(path: Path, fmt: str, progress: BuildProgress) -> np.ndarray:
    """Byte offsets of every record line (plus the file size at the end), checking each record."""
    size = path.stat().st_size
    offsets: list[int] = []
    hashes: list[int] = []
    position = 0
    with path.open("rb") as f:
        for line_number, raw in enumerate(f, start=1):
            start, position = position, position + len(raw)
            record = parse_line(path, line_number, raw)
            if record is None:
                continue
            page = page_from_record(path, line_number, record, fmt)
            offsets.append(start)
            hashes.append(_id_hash(page.id))
            if line_number % 100_000 == 0:
                progress(f"Scanning {path.name}: {len(offsets):,} pages", position / max(size, 1))
    if not offsets:
        raise CorpusError(f"{path}: the corpus has no pages.")
    ids = np.asarray(hashes, dtype=np.uint64)
    if len(np.unique(ids)) != len(ids):
        _report_duplicate(path, fmt)
    return np.asarray([*offsets, size], dtype=np.int64)


def _report_duplicate(path: Path, fmt: str) -> None:
    """Second pass, only when the hashes collide: name the line of the repeated id (or accept a true collision)."""
    seen: dict[str, int] = {}
    with path.open("rb") as f:
        for line_number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            page = page_from_record(path, line_number, json.loads(raw), fmt)
            if page.id in seen:
                raise CorpusError(
                    f"{path}, line {line_number}: page id {page.id!r} already used on line {seen[page.id]}; "
                    "ids must be unique."
                )
            seen[page.id] = line_number


class PageStore(Sequence[Page]):
    """A read-only sequence of pages backed by the corpus file and a table of line offsets."""

    def __init__(self, path: Path, fmt: str, offsets: np.ndarray):
        self.path = Path(path)
        self.fmt = fmt
        self.offsets = offsets
        self._fd = os.open(self.path, os.O_RDONLY)

    @classmethod
    def open(
        cls, path: str | Path, cache_dir: Path | None = None, progress: BuildProgress = lambda m, f: None
    ) -> PageStore:
        """Open a corpus file, scanning it once (or loading the cached offset table)."""
        path = Path(path)
        if not path.is_file():
            raise CorpusError(f"{path}: no such corpus file.")
        fmt = sniff_format(path)
        folder = Path(cache_dir) / "pagestore" / file_key(path) if cache_dir else None
        if folder and (folder / "offsets.npy").is_file():
            try:
                return cls(path, fmt, np.load(folder / "offsets.npy", mmap_mode="r"))
            except (OSError, ValueError):
                progress("Rescanning the corpus: the cached offset table could not be read", 0.0)
        offsets = scan(path, fmt, progress)
        if folder:
            try:
                replace_folder(folder, lambda tmp: np.save(tmp / "offsets.npy", offsets))
            except OSError as e:
                progress(f"The offset table works but could not be cached: {e}", 1.0)
        return cls(path, fmt, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"page {i} is out of range for {len(self)} pages")
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        raw = os.pread(self._fd, end - start, start)
        line = raw.decode("utf-8").split("\n", 1)[0]
        return page_from_record(self.path, None, json.loads(line), self.fmt)

    def __iter__(self) -> Iterator[Page]:
        for i in range(len(self)):
            yield self[i]

    def fingerprint(self) -> str:
        return file_key(self.path)

    def close(self) -> None:
        os.close(self._fd)
