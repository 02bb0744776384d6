"""experiment when_to_retrieve's run (python -m lab experiment when_to_retrieve): NR-LLM, AR-LLM and Adapt-LLM on each
test set, the popularity baseline on PopQA, each set's summary (policy_scores.py) and the record's provenance; the
record is named when_to_retrieve. Left out: the rows themselves (when_to_retrieve.py) and options and printing
(cli/experiments.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from lab.evaluation.policy_scores import summarise_policies
from lab.evaluation.when_to_retrieve import evaluate_policies, popularity_rows
from lab.records import Run
from raqa.evaluation.questions import QAItem


def run_eval_adapt(
    sets: dict[str, Sequence[QAItem]],
    popqa: Sequence | None,
    model,
    search: Callable,
    folders: dict,
    service,
    sample: dict,
    bar: Callable[[str, int], object],
    rows=None,
) -> Run:
    """NR-LLM, AR-LLM and Adapt-LLM on each question set, and the popularity baseline on PopQA if given.

    sample: limit, seed and the adapters' folder (the evaluator adds the command, the seconds and the server);
    bar(label, total) is a context manager with update(n), e.g. a tqdm bar; rows: the resumable rows
    (when_to_retrieve.adapt_rows), the questions already there are not asked again.
    """
    from raqa.when_to_retrieve.model import adapter_card  # lazy: imports torch

    start = time.perf_counter()
    results: dict = {"datasets": {}, "rows": {}}
    for dataset, items in sets.items():
        with bar(f"experiment when_to_retrieve {dataset}", len(items)) as shown:
            made = evaluate_policies(
                items, model, search, progress=lambda shown=shown: shown.update(1), rows=rows, group=dataset
            )
        results["datasets"][dataset] = summarise_policies(made)
        results["rows"][dataset] = made
    if popqa:
        with bar("experiment when_to_retrieve popqa", len(popqa)) as shown:
            pop = popularity_rows(
                popqa, model, search, seed=sample["seed"], progress=lambda: shown.update(1), rows=rows
            )
        summary = summarise_policies(pop["rows"])
        results["datasets"]["popqa"] = {**summary, "threshold": pop["threshold"], "dev_n": pop["dev_n"]}
        results["rows"]["popqa"] = pop["rows"]
    seconds = time.perf_counter() - start
    results["adapters"] = {
        name: {k: adapter_card(folder).get(k) for k in ("label", "command", "data", "training")}
        for name, folder in folders.items()
    }
    provenance = {
        "sample": {"split": "test", "limit": sample["limit"], "seed": sample["seed"]},
        "model": model.name,
        "adapter": sample["adapters"],
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        "settings": {"retrieval": "BM25 top 1 page, cut to 160 tokens", "decoding": "greedy, at most 32 tokens"},
    }
    return Run(results, provenance, seconds)
