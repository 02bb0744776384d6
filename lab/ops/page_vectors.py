"""Encode every page of the embedded corpus once and write the vectors the page ships (raqa/retrieval/page_vectors.py).

    python -m lab.ops.page_vectors            # writes assets/dense/page-vectors.npz (about 4 minutes on 2 cores)
    python -m lab.ops.page_vectors --measure 50 --out assets/results/page-vectors.json

The second times hybrid retrieval of distinct NQ-open dev questions on pages seen for the first time, encoding the
pages as before against reading the shipped vectors, and counts the questions whose top 15 come out the same.

The vectors are the ones hybrid retrieval would compute for each page on first use (`DenseEncoder.encode` of title
and text, the same batch size and token limit), stored in float16; the file names the corpus fingerprint and the
encoder they are valid for, and the command, code and date that made them.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from lab.ops.bench_timing import percentile
from lab.records import command_line, write_json
from raqa.evaluation.questions import load_questions
from raqa.evaluation.records import provenance
from raqa.retrieval.corpus import EMBEDDED_NAME, fingerprint, load_embedded
from raqa.retrieval.dense import BATCH, shared_encoder
from raqa.retrieval.page_vectors import SHIPPED, PageVectors, encoder_name

PAGES_PER_LINE = BATCH * 8  # pages between progress lines


def encode_pages(pages, encoder, say=print) -> np.ndarray:
    """Every page's unit vector, in order, in float16; a progress line every PAGES_PER_LINE pages."""
    start, rows = time.perf_counter(), []
    for first in range(0, len(pages), PAGES_PER_LINE):
        chunk = pages[first : first + PAGES_PER_LINE]
        rows.append(encoder.encode([f"{p.title}\n{p.text}" for p in chunk]))
        done = first + len(chunk)
        say(f"Encoded {done:,}/{len(pages):,} pages ({time.perf_counter() - start:.0f} s)")
    return np.concatenate(rows).astype(np.float16)


def measure_page_vectors(questions: list[str], k: int = 15) -> dict:
    """Seconds of a hybrid search on unseen pages, encoding them against the shipped vectors, and how often the two
    give the same top k in the same order."""
    from raqa.config import AppConfig
    from raqa.retrieval.dense import HybridIndex
    from raqa.retrieval.index import load_or_build

    pages, encoder = load_embedded(), shared_encoder()
    bm25 = load_or_build(pages, AppConfig.from_env().cache_dir)
    shipped = HybridIndex.with_shipped_vectors(bm25, encoder)
    if len(shipped.known) != len(pages):
        raise SystemExit(f"{SHIPPED} does not fit the embedded corpus: run python -m lab.ops.page_vectors first")
    encoder.encode(["warm-up"])
    seconds: dict[str, list[float]] = {"encoded": [], "shipped": []}
    same = 0
    for n, question in enumerate(questions, start=1):
        start = time.perf_counter()
        encoded = HybridIndex(bm25, encoder).search(question, k)  # a new index: none of its pages seen before
        seconds["encoded"].append(time.perf_counter() - start)
        start = time.perf_counter()
        hits = shipped.search(question, k)
        seconds["shipped"].append(time.perf_counter() - start)
        same += [h.page.id for h in hits] == [h.page.id for h in encoded]
        print(f"{n}/{len(questions)}: {seconds['encoded'][-1]:.2f} s encoding, {seconds['shipped'][-1]:.3f} s shipped")
    summary = {
        way: {"p50_s": percentile(values, 50), "p95_s": percentile(values, 95), "n": len(values)}
        for way, values in seconds.items()
    }
    return {"seconds": summary, "same_top_k": {"k": k, "questions": same, "of": len(questions)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.ops.page_vectors", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(SHIPPED), help="where to write the vectors (default: the shipped file)")
    parser.add_argument("--measure", type=int, metavar="N", help="time N NQ-open dev questions instead (a record)")
    args = parser.parse_args(argv)
    if args.measure:
        questions = [item.question for item in load_questions("nq", "dev", args.measure, seed=0)]
        command = command_line("lab.ops.page_vectors", measure=args.measure, out=args.out)
        record = {"measurement": "page_vectors", "command": command, "data": f"NQ-open dev, seed 0, {args.measure}"}
        write_json(Path(args.out), {**record, **provenance(), "results": measure_page_vectors(questions)})
        print(f"wrote {args.out}")
        return 0
    pages, encoder = load_embedded(), shared_encoder()
    vectors = encode_pages(pages, encoder)
    about = {
        "corpus": EMBEDDED_NAME,
        "corpus_fingerprint": fingerprint(pages),
        "encoder": encoder_name(encoder.max_tokens),
        "command": command_line("lab.ops.page_vectors", out=None if args.out == str(SHIPPED) else args.out),
        **provenance(),
    }
    PageVectors(np.array([p.id for p in pages]), vectors, about).save(Path(args.out))
    print(f"Wrote {len(pages):,} page vectors to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
