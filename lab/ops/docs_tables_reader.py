"""The docs tables of the 1.5B reader: the per-question measurement of the page's defaults, before and after, and the
grader's calibration on dev (`docs/reading.md`). Left out: running anything (reading_eval.py makes the records)."""

from __future__ import annotations

from lab.ops.docs_tables import ROOT, load_record, made_by, markdown_rows, share

READING = "assets/results/reading-nq+triviaqa.json"
RETRIEVAL = "assets/results/retrieval-{split}-nq+triviaqa.json"
GRADER = "assets/grader/grader.json"
FORMULATIONS = "assets/results/grader-formulations.json"
SIGNAL_NAMES = {  # how the table names each signal of lab/evaluation/grader_probe.py
    "fresh": "the shipped grader: a fresh chat with the page as shown",
    "focused": "the same, shown only the sentences around the answer",
    "claim": '"according to the passage alone, is the claim correct?"',
    "follow_up": "a follow-up turn of the reader's own chat",
    "judge": "the MiniLM answer judge's support where it agrees",
    "reader": "the reader's own P(ANSWER)",
    "fresh+judge": "the shipped grader plus the judge's support",
}
ROWS = (  # (what the row measures, how to read it from one reader's summary)
    ("readable questions ending right", lambda s: share(s["per_question"]["readable"]["right"])),
    ("no-answer questions ending with an answer", lambda s: share(s["per_question"]["no_answer"]["answered"])),
    ("green (Answered) answers that are right", lambda s: share(s["badge"]["green"]["precision"])),
    ("right final answers that are green", lambda s: share(s["badge"]["green"]["coverage"])),
    ("amber (Weak support) answers that are right", lambda s: share(s["badge"]["amber"]["precision"])),
    ("windows the model never read", lambda s: str(s["windows_without_model"])),
    ("first window's verdict, p50", lambda s: _seconds(s["first_verdict_seconds"]["p50"])),
    ("a whole run, p50 / p95", lambda s: f"{_seconds(s['seconds']['p50'])} / {_seconds(s['seconds']['p95'])}"),
)


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} s"


def reading() -> str:
    """Each reader's figures per set, the first reader (the page's default) first."""
    if not (ROOT / READING).is_file():
        return f"`{READING}` is not committed yet."
    record = load_record(READING)
    readers, results = record["readers"], record["results"]
    sets = [key for key in results[readers[0]] if key != "all"]
    header = ["per question, page defaults", *(f"{r}, {s}" for s in sets for r in readers)]
    rows = [[name, *(read(results[r][s]) for s in sets for r in readers)] for name, read in ROWS]
    return "\n".join([made_by(READING, record), "", *markdown_rows(header, rows)])


def grader() -> str:
    """The thresholds chosen on dev and what dev answers did at them."""
    if not (ROOT / GRADER).is_file():
        return f"`{GRADER}` is not committed yet."
    record = load_record(GRADER)
    dev = record.get("dev", {})
    answered = record["answered"]
    rows = [
        ["Weak support (amber) from P(yes)", f"{record['weak']:.2f}"],
        [
            "Answered (green) from P(yes)",
            "never (no cut reached the target)" if answered is None else f"{answered:.4f}",
        ],
        ["dev answers at or above the green cut that are right", share(dev.get("green_precision", {}))],
        ["dev answers below it (amber) that are right", share(dev.get("weak_precision", {}))],
        [
            "target precision of green, on at least",
            f"{record['precision_target']:.0%}, {record['min_answers']} answers",
        ],
    ]
    for cut, summary in dev.get("cuts", {}).items():
        readable, no_answer = summary["per_question"]["readable"]["right"], summary["per_question"]["no_answer"]
        rows.append(
            [
                f"dev runs replayed with Weak support from {float(cut):.2f}: readable right / no-answer answered",
                f"{share(readable)} / {share(no_answer['answered'])}",
            ]
        )
    return "\n".join([made_by(GRADER, record), "", *markdown_rows(["grader", "value"], rows)])


def formulations() -> str:
    """How well each way of asking the grader, and each signal beside it, separates answers the page states."""
    if not (ROOT / FORMULATIONS).is_file():
        return f"`{FORMULATIONS}` is not committed yet."
    record = load_record(FORMULATIONS)
    results = record["results"]
    rows = []
    for signal, scores in results["signals"].items():
        auc, best = scores["auc"], scores["best_precision_at_half_coverage"]
        auc_text = "–" if auc is None else f"{auc['value']:.2f} [{auc['low']:.2f}, {auc['high']:.2f}]"
        best_text = "–" if best["precision"] is None else f"{best['precision']:.0%} (from {best['cut']:.2f})"
        rows.append([SIGNAL_NAMES.get(signal, signal), auc_text, best_text])
    counts = (
        f"{results['graded']} answers graded ({results['graded_right']} right and stated by their page), from "
        f"{results['windows']} windows; the reader answered on {results['answered_on_answer_free_pages']} of "
        f"{results['answer_free_pages']} answer-free pages and was right on {results['gold_page_right']} of "
        f"{results['gold_pages']} pages holding a gold answer."
    )
    header = ["signal", "AUC [95%]", "best precision keeping half the right answers"]
    return "\n".join([made_by(FORMULATIONS, record), "", counts, "", *markdown_rows(header, rows)])


def retrieval() -> str:
    """hit@1, hit@5 and hit@15 of BM25 and hybrid, per set: dev (which chose the default) and test."""
    blocks = []
    for split in ("dev", "test"):
        path = RETRIEVAL.format(split=split)
        if not (ROOT / path).is_file():
            blocks.append(f"`{path}` is not committed yet.")
            continue
        record = load_record(path)
        results = record["results"]
        header = [f"{split}: a page holding a gold answer in the top k", *results[next(iter(results))]]
        rows = [
            [f"{dataset} {k}", *(share(by[name][k]) for name in by)]
            for dataset, by in results.items()
            for k in by[next(iter(by))]
        ]
        blocks.append("\n".join([made_by(path, record), "", *markdown_rows(header, rows)]))
    return "\n\n".join(blocks)
