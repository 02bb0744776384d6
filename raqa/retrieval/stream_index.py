"""Build a BM25 index over a corpus too large to hold in memory, streaming it in chunks.

Pass 1 tokenizes the pages a chunk at a time and writes each chunk's (term, doc, tf) postings to a
scratch folder, keeping only the vocabulary, document lengths and document frequencies in memory.
Pass 2 knows every term's document frequency, so it lays out the column-compressed score matrix on
disk (memory-mapped .npy files) and scatters each chunk's scores into place. Memory therefore grows
with the vocabulary and the number of pages (4 bytes each), not with the texts or the postings. The
result is saved in bm25s' own format, so `BM25Index.load` memory-maps it like any other index, and it
scores exactly as `BM25Index.build` does (bm25s' Lucene BM25: idf = ln(1 + (N - df + 0.5)/(df + 0.5)),
tf part = tf / (tf + k1 (1 - b + b len/avglen))).
Left out: parallel tokenization, and merging indexes built on several machines.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from raqa.retrieval.atomic import BuildProgress, replace_folder
from raqa.retrieval.corpus import Page
from raqa.retrieval.tokenize import TokenizerName, get_tokenizer

CHUNK_PAGES = 5000


def _postings(tokens: list[list[str]], vocab: dict[str, int], first_doc: int):
    """(term ids, doc ids, term frequencies, document lengths) of one chunk; grows vocab."""
    terms, docs, tfs, lengths = [], [], [], []
    for offset, doc_tokens in enumerate(tokens):
        ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in doc_tokens), dtype=np.int32, count=len(doc_tokens))
        unique, counts = np.unique(ids, return_counts=True)
        terms.append(unique)
        tfs.append(counts.astype(np.float32))
        docs.append(np.full(len(unique), first_doc + offset, dtype=np.int32))
        lengths.append(len(doc_tokens))
    empty_i, empty_f = np.empty(0, np.int32), np.empty(0, np.float32)
    return (
        np.concatenate(terms) if terms else empty_i,
        np.concatenate(docs) if docs else empty_i,
        np.concatenate(tfs) if tfs else empty_f,
        np.asarray(lengths, dtype=np.int64),
    )


def _grow(array: np.ndarray, size: int) -> np.ndarray:
    if size <= len(array):
        return array
    grown = np.zeros(max(size, 2 * len(array)), dtype=array.dtype)
    grown[: len(array)] = array
    return grown


def build_streaming(
    pages: Sequence[Page],
    folder: Path,
    tokenizer: TokenizerName = "wordpiece",
    k1: float = 0.9,
    b: float = 0.8,
    chunk_pages: int = CHUNK_PAGES,
    progress: BuildProgress = lambda message, fraction: None,
) -> dict:
    """Index `pages` (any sequence; a PageStore reads them from disk on demand) into `folder`.

    Returns what it measured: pages, vocabulary, postings and seconds per pass.
    """
    import bm25s

    tokenize = get_tokenizer(tokenizer)
    n = len(pages)
    Path(folder).parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="raqa-stream-index-", dir=Path(folder).parent))
    started = time.perf_counter()
    try:
        vocab: dict[str, int] = {}
        df = np.zeros(1 << 16, dtype=np.int64)
        lengths = np.zeros(n, dtype=np.int64)
        chunks = 0
        for first in range(0, n, chunk_pages):
            chunk = [pages[i] for i in range(first, min(n, first + chunk_pages))]
            terms, docs, tfs, chunk_lengths = _postings(tokenize([f"{p.title}\n{p.text}" for p in chunk]), vocab, first)
            lengths[first : first + len(chunk)] = chunk_lengths
            df = _grow(df, len(vocab))
            np.add.at(df, terms, 1)
            np.savez(scratch / f"chunk-{chunks:06d}.npz", terms=terms, docs=docs, tfs=tfs)
            chunks += 1
            progress(f"Tokenizing pages {first + len(chunk):,}/{n:,}", 0.6 * (first + len(chunk)) / max(n, 1))
        tokenized = time.perf_counter()

        df = df[: len(vocab)]
        avg_len = float(lengths.mean()) if n else 0.0
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
        norm = (k1 * (1 - b + b * lengths / avg_len)).astype(np.float32) if n else lengths.astype(np.float32)
        indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        nnz = int(indptr[-1])
        data = np.lib.format.open_memmap(scratch / "data.npy", mode="w+", dtype=np.float32, shape=(max(nnz, 1),))
        indices = np.lib.format.open_memmap(scratch / "indices.npy", mode="w+", dtype=np.int32, shape=(max(nnz, 1),))
        cursor = indptr[:-1].copy()
        for number in range(chunks):
            with np.load(scratch / f"chunk-{number:06d}.npz") as part:
                terms, docs, tfs = part["terms"], part["docs"], part["tfs"]
            scores = idf[terms] * (tfs / (tfs + norm[docs]))
            # subtle: a stable sort by term keeps docs ascending within each term, as CSC needs
            order = np.argsort(terms, kind="stable")
            sorted_terms = terms[order]
            group_start = np.searchsorted(sorted_terms, sorted_terms, side="left")
            positions = cursor[sorted_terms] + (np.arange(len(order)) - group_start)
            data[positions] = scores[order]
            indices[positions] = docs[order]
            cursor += np.bincount(terms, minlength=len(vocab))
            progress(f"Scoring postings, chunk {number + 1:,}/{chunks:,}", 0.6 + 0.35 * (number + 1) / max(chunks, 1))
        data.flush()
        indices.flush()
        scored = time.perf_counter()

        retriever = bm25s.BM25(k1=k1, b=b)
        retriever.scores = {"data": data[:nnz], "indices": indices[:nnz], "indptr": indptr, "num_docs": n}
        retriever.vocab_dict = vocab
        retriever.nonoccurrence_array = None  # only BM25L and BM25+ use one; the Lucene variant does not
        retriever.corpus = None

        def write(tmp: Path) -> None:
            retriever.save(str(tmp), show_progress=False)
            (tmp / "raqa.json").write_text(json.dumps({"pages": n, "tokenizer": tokenizer, "built": "streaming"}))

        replace_folder(Path(folder), write)
        progress("Index ready", 1.0)
        return {
            "pages": n,
            "vocabulary": len(vocab),
            "postings": nnz,
            "average_tokens": avg_len,
            "tokenize_s": tokenized - started,
            "score_s": scored - tokenized,
            "total_s": time.perf_counter() - started,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
