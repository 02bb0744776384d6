"""`python -m lab bench scale`: index a generated corpus of many pages and measure time, memory and latency.

The generated pages are made of real sentences: each takes a title and 3 to 8 sentences drawn at random
(seeded) from the embedded Wikipedia lead sections, so word statistics are those of Wikipedia while the
page count is whatever is asked. Generation runs in a child process, so the peak memory measured is the
build's own: the page store's scan and the streamed index build, reading the file from disk. Queries are
timed on the memory-mapped index with real NQ-open questions, and each query also reads its top 10 pages
from the file. Left out: the 5.9 M-page KILT file itself (not installable here); docs/reliability.md extrapolates.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import resource
import time
from pathlib import Path

import numpy as np

from lab.ops.bench_timing import percentile
from raqa.evaluation.records import provenance
from raqa.retrieval.corpus import load_corpus
from raqa.retrieval.index import BM25Index, index_folder
from raqa.retrieval.pagestore import PageStore
from raqa.retrieval.stream_index import build_streaming
from raqa.text import split_sentences


def generate(path: Path, pages: int, seed: int = 0) -> int:
    """Write `pages` pages of real sentences to a JSONL file; returns its size in bytes."""

    source = load_corpus()
    sentences = [s for page in source for s in split_sentences(page.text)]
    titles = [page.title for page in source]
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for i in range(pages):
            text = " ".join(rng.choice(sentences) for _ in range(rng.randint(3, 8)))
            f.write(json.dumps({"id": f"g{i}", "title": f"{rng.choice(titles)} ({i})", "text": text}) + "\n")
    return path.stat().st_size


def _rss_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_now_mib() -> float:
    from lab.ops.reliability import rss_mib  # lazy: imports torch

    return rss_mib()


def measure_scale(pages: int, work_dir: Path, questions: list[str], seed: int = 0, progress=print) -> dict:
    """Generate, index and query a corpus of `pages` pages under work_dir; returns the measurements."""

    work_dir.mkdir(parents=True, exist_ok=True)
    corpus = work_dir / f"generated-{pages}.jsonl"
    started = time.perf_counter()
    child = multiprocessing.get_context("spawn").Process(target=generate, args=(corpus, pages, seed))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"generating the corpus failed (exit {child.exitcode})")
    generated_s = time.perf_counter() - started
    progress(f"generated {pages:,} pages ({corpus.stat().st_size / 2**20:.0f} MiB) in {generated_s:.0f} s")

    rss_before = _rss_now_mib()
    started = time.perf_counter()
    store = PageStore.open(corpus, work_dir / "cache", lambda m, f: progress(m))
    scan_s = time.perf_counter() - started
    folder = index_folder(work_dir / "cache", store, "wordpiece")
    last = [0.0]

    def show(message: str, fraction: float) -> None:
        if fraction - last[0] >= 0.1 or fraction == 1.0:
            last[0] = fraction
            progress(f"{message} ({fraction:.0%})")

    build = build_streaming(store, folder, "wordpiece", progress=show)
    peak = _rss_peak_mib()
    index_bytes = sum(p.stat().st_size for p in folder.iterdir())

    started = time.perf_counter()
    index = BM25Index.load(folder, store)
    load_ms = (time.perf_counter() - started) * 1000
    index.search(questions[0], 10)  # warm the page cache for the vocabulary
    query_ms, fetch_ms = [], []
    for question in questions:
        t0 = time.perf_counter()
        index.search(question, 10)  # the hits hold their pages, read from the file
        query_ms.append((time.perf_counter() - t0) * 1000)
    rng = np.random.default_rng(seed)
    for _ in range(100):
        ids = [int(i) for i in rng.integers(0, len(store), 10)]
        t0 = time.perf_counter()
        _ = [store[i] for i in ids]
        fetch_ms.append((time.perf_counter() - t0) * 1000)
    return {
        "pages": pages,
        "corpus_mib": corpus.stat().st_size / 2**20,
        "generate_s": generated_s,
        "scan_s": scan_s,
        "build": build,
        "index_mib": index_bytes / 2**20,
        "rss_before_build_mib": rss_before,
        "rss_peak_mib": peak,
        "offset_table_mib": store.offsets.nbytes / 2**20,
        "index_load_ms": load_ms,
        "query_ms": {"p50": percentile(query_ms, 50), "p95": percentile(query_ms, 95), "n": len(query_ms)},
        "fetch_10_pages_ms": {"p50": percentile(fetch_ms, 50), "p95": percentile(fetch_ms, 95), "n": len(fetch_ms)},
    }


def extrapolate(result: dict, target_pages: int, tokens_per_page: float) -> dict:
    """Scale the measurement linearly in tokens (build, index size, query time) and pages (offset table)."""
    scale = target_pages / result["pages"] * tokens_per_page / result["build"]["average_tokens"]
    return {
        "pages": target_pages,
        "assumed_tokens_per_page": tokens_per_page,
        "token_scale": scale,
        "build_hours": result["build"]["total_s"] * scale / 3600,
        "index_gib": result["index_mib"] * scale / 1024,
        "offset_table_mib": result["offset_table_mib"] * target_pages / result["pages"],
        "query_ms_p50": result["query_ms"]["p50"] * scale,
        "note": "linear in postings; the peak memory of the build does not grow with the corpus beyond 16 bytes "
        "a page (lengths and offsets) plus the vocabulary",
    }


def scale_record(command: str, results: dict) -> dict:
    """scale.json's content: the measurement, its command and results, and the shared provenance."""
    return {"measurement": "scale", "command": command, "results": results, **provenance()}
