"""The answer judge's measured tables in docs/judge.md: the badge per question, the judges compared, the verifier,
the support model and the hand-read labels. Each starts by naming the file it reads and the command that remakes it
(render_docs.py lists them; the shared helpers are docs_tables.py's). Left out: the page's prose, running anything.
"""

from __future__ import annotations

from collections.abc import Mapping

from lab.ops.docs_tables import load_record, made_by, markdown_rows, share
from lab.training.judge_card import card_section

BADGE_ROWS = (
    ("Answered (green) badges on a right answer", "answered_precision"),
    ("Weak support (amber) answers that are right", "weak_precision"),
    ("questions ending with an answer", "ended_with_answer"),
    ("questions ending right and Answered, of all", "right_and_answered"),
    ("... of those with the answer in a retrieved page", "right_and_answered_of_retrievable"),
    ("unanswerable questions ending with an answer", "unanswerable_with_answer"),
    ("unanswerable questions ending green", "unanswerable_answered_green"),
)


def badges() -> str:
    path = "assets/results/badges-nq+triviaqa.json"
    record = load_record(path)
    sets = record["results"]
    header = ["per question"] + [f"{d} {when}" for d in sets for when in ("before", "after")]
    rows = [
        [label] + [share(sets[d]["per_question"][when][key]) for d in sets for when in ("before", "after")]
        for label, key in BADGE_ROWS
    ]
    pages = [
        f"- {d}: the judge over every top-15 page ({p['pages']:,} pages, {p['answer_bearing']} answer-bearing): "
        f"AUC of answer-bearing vs answer-free pages by P(answer) {p['auc_before']:.3f}, by support "
        f"{p['auc_after']:.3f}; its own extraction exactly right on answer-bearing pages "
        f"{share(p['judge_exact_match_on_answer_bearing'], 0)}; {s['model_calls']:,} model calls"
        for d, s in sets.items()
        if (p := s["pages"])
    ]
    return "\n".join([made_by(path, record), "", *markdown_rows(header, rows), "", *pages])


JUDGE_ROWS = (  # (label, a judge's measurement of one set -> the estimate shown)
    (
        "page AUC, answer-bearing vs answer-free",
        lambda m: {**m["window"]["auc"], "n": m["window"]["auc"]["n_positive"]},
    ),
    ("exact match on answer-bearing pages", lambda m: m["window"]["exact_match"]),
    ("answer-free pages at or above its threshold", lambda m: m["window"]["at_threshold"]["negative_pages_answered"]),
    ("most confident extraction right, per question", lambda m: m["per_question"]["best_right"]),
    ("questions with a page >= 0.7", lambda m: m["per_question"]["first_at"]["0.7"]["answered"]),
    ("... its extraction right", lambda m: m["per_question"]["first_at"]["0.7"]["precision"]),
    ("questions with a page >= 0.9", lambda m: m["per_question"]["first_at"]["0.9"]["answered"]),
    ("... its extraction right", lambda m: m["per_question"]["first_at"]["0.9"]["precision"]),
)


def _estimate(e: Mapping) -> str:
    """A share as _share writes it, or an AUC (no percent sign) with its interval."""
    if "n_positive" in e:
        return f"{e['value']:.3f} [{e['low']:.3f}, {e['high']:.3f}]"
    return share(e)


def judges() -> str:
    path = "assets/results/judges-nq+triviaqa.json"
    record = load_record(path)
    sets, folders = record["results"], list(record["judges"])
    header = ["test"] + [f"{d}: `{f}`" for d in sets for f in folders]
    rows = [[label] + [_estimate(pick(sets[d][f])) for d in sets for f in folders] for label, pick in JUDGE_ROWS]
    made = [
        f"- `{f}`: made by `{j['command']}` (weights {j['weights']}, threshold {j['threshold']})"
        for f, j in record["judges"].items()
    ]
    return "\n".join([made_by(path, record), "", *markdown_rows(header, rows), "", *made])


def verifier() -> str:
    path = "assets/results/verifier/card.json"
    card = load_record(path)
    measured, names = card["measured"], ("support", "verifier", "support_and_verifier")
    header = ["held-out dev extractions", "judge P", "support", "verifier", "support + verifier"]
    rows = [["AUC, right vs wrong", *(f"{measured['auc'][n]:.3f}" for n in ("judge_p", *names))]]
    for at, cut in enumerate(c["cut"] for c in measured["per_question"]["support"]):
        finals = [measured["per_question"][n][at] for n in names]
        rows.append([f"first page ≥ {cut}: questions ending there", "", *(f"{f['finals']}" for f in finals)])
        rows.append(["... its answer right", "", *(share(f["precision"] or {}) for f in finals)])
    about = f"{measured['extractions']:,} extractions ({measured['right']} right) of {measured['questions']} questions"
    return "\n".join([made_by(path, card), "", *markdown_rows(header, rows), "", f"- {about}"])


def support() -> str:
    path = "assets/judge/support.json"
    section = card_section(load_record(path)).strip().split("\n", 1)[1]  # less the card's heading: the page has its own
    return f"From `{path}`, as the judge's card closes:\n\n{section}"


LABEL_FILES = {"dev": "NQ-open + TriviaQA dev (training part)", "squad": "SQuAD-open test"}


def labels() -> str:
    path = "assets/results/judge-labels/card.json"
    card = load_record(path)
    files = {name: card["files"][f"assets/results/judge-labels/{name}.jsonl"] for name in LABEL_FILES}
    header = [
        "positive rule: the sentence shares with the question",
        *(f"{t}: positives answering it" for t in LABEL_FILES.values()),
    ]
    rules = (
        ("1", "a content word (the rule until now)"),
        ("2", "2 content words besides the answer's"),
        ("3", "3 besides the answer's"),
    )
    rows = [[label, *(share(files[n]["rules"][rule]["right"]) for n in LABEL_FILES)] for rule, label in rules]
    drawn = [f"- `{name}.jsonl`: drawn by `{files[name]['drawn_by'][0]}`" for name in LABEL_FILES]
    return "\n".join([made_by(path, card), "", *markdown_rows(header, rows), "", *drawn])


def gate_with_model() -> str:
    path = "assets/results/gate-with-model/record.json"
    record = load_record(path)
    header = [
        "gate",
        "dev questions ending with an answer",
        "... right",
        "right, of all",
        "unanswerable ending with one",
    ]
    rows = [
        [
            f"{s['gate']}" + (" (shipped)" if s["gate"] == record["shipped_gate"] else ""),
            share(s["ended_with_answer"]),
            share(s["answers_right"]),
            share(s["right_of_all"]),
            share(s["unanswerable_with_answer"]),
        ]
        for s in record["results"]["all"]
    ]
    about = f"- {record['model_calls']:,} model calls, {record['seconds'] / 60:.0f} min on 2 cores; {record['data']}"
    return "\n".join([made_by(path, record), "", *markdown_rows(header, rows), "", about])
