"""Whether the 1.5B can tell an answer its page states from one it does not: each way of asking it, and the signals
that could be combined with it, scored on the same dev windows.

    python -m lab.evaluation.grader_probe --per-kind 16 --seed 7 --out assets/results/grader-formulations.json

Why: the badge's grader (raqa/reading/grader.py) never earned a green badge on dev. This measures whether that is the
threshold's fault or the signal's. For NQ-open and TriviaQA dev questions, drawn as reading_eval draws them (readable
and, half as many, no-answer), the page's default reader reads, one page a window with the page's settings, the first
of hybrid retrieval's top 15 pages that holds a gold answer and the first two that hold none. Every answer the page
mentions (the others are red without asking) is then scored by:

- `fresh`: the shipped grader, a fresh chat with the page as the reader was shown it;
- `focused`: the same, shown only the sentences around the answer's mention (a prompt a third as long);
- `claim`: "according to the passage alone, is the claim 'the answer is X' correct?";
- `follow_up`: a follow-up turn in the reader's own chat, which would reuse the reader's cached prompt;
- `judge`: the MiniLM answer judge's support on that page where its answer agrees with the reader's, else 0;
- `reader`: the reader's own P(ANSWER) for the window; `fresh+judge`: their sum.

An answer is labelled right when it contains a gold answer (reading_eval.is_right) and the page as shown holds one:
an answer the page does not state is what the badge must not vouch for, even when it is true. Reported per signal:
AUC with a 95% bootstrap interval, and the best precision of any cut that keeps at least half of the right answers
(what the green badge asks: 90%). Rows are written as they go to a JSON-lines file beside the record.

Left out: choosing thresholds (reading_eval --calibrate does, on whole runs) and test questions (this only informs a
design choice, so it reads dev questions only).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from pathlib import Path

from lab.evaluation.reading_eval import draw, is_right
from lab.records import command_line, write_json
from lab.stats import auc_interval
from raqa.config import AppConfig, RunForm
from raqa.evaluation.metrics import is_positive
from raqa.evaluation.questions import load_questions
from raqa.evaluation.records import RESULTS_DIR, provenance
from raqa.models.openai_stream import choice_probabilities
from raqa.reading.agreement import agrees
from raqa.reading.contrast import CAPITAL_OF, FIRST, SUPERLATIVE, WORLDWIDE, contrast
from raqa.reading.engine import prompt
from raqa.reading.grader import GRADER_SYSTEM, YES_NO, grading_messages, yes_probability
from raqa.reading.grounding import mentions
from raqa.reading.prompts import parse_reply, shown_sentences
from raqa.text import restates_question, split_sentences

FORMULATIONS_FILE = RESULTS_DIR / "grader-formulations.json"
PROBES = ("fresh", "focused", "claim", "follow_up", "judge", "reader", "fresh+judge")
NEGATIVE_PAGES = 2  # answer-free pages read per question


def focused(text: str, answer: str) -> str | None:
    """The sentences around the first two that mention the answer (one each side), or None when none does.

    Example:
        >>> focused("A is here. B met Ann. C left. D came. E went.", "Ann")
        'A is here. B met Ann. C left.'
    """
    sentences = split_sentences(text)
    hits = [i for i, s in enumerate(sentences) if mentions(s, answer)][:2]
    keep = sorted({j for i in hits for j in (i - 1, i, i + 1) if 0 <= j < len(sentences)})
    return " ".join(sentences[j] for j in keep) or None


def claim_messages(question: str, answer: str, title: str, text: str) -> list[dict[str, str]]:
    check = (
        f"Passage ({title}): {text}\n\nQuestion: {question}\nClaim: the answer is {answer}.\n\n"
        "According to the passage alone, is the claim correct? Reply Yes or No."
    )
    return [{"role": "system", "content": GRADER_SYSTEM}, {"role": "user", "content": check}]


def follow_up(page_id: str, answer: str) -> dict[str, str]:
    check = (
        f"Judge only by what page {page_id} says, not by what you know. Does it state that {answer} is the answer to "
        "this exact question? Reply No if the page does not say it, or says something different. Reply Yes or No."
    )
    return {"role": "user", "content": check}


class Probe:
    """The page's default reader and its backend, asked directly (one request at a time, greedy)."""

    def __init__(self, service, shots: int | None = None, grade: bool = True):
        plan = service.plan("probe", RunForm())
        self.backend, self.grade = plan.backend, grade
        self.settings = plan.settings if shots is None else plan.settings.replace(shots=shots)
        self.search = service.hybrid.get().search
        from raqa.reading.judge import AnswerJudge  # lazy: loads the MiniLM judge

        self.judge = AnswerJudge.load()

    def _ask(self, messages, max_tokens: int) -> dict:
        return self.backend.server.handle_chat_completions(self.backend._request(messages, max_tokens, False))

    @functools.lru_cache(maxsize=4)  # noqa: B019 (one Probe a process): a question's pages are read once
    def _judged(self, question: str, hits: tuple) -> tuple:
        return tuple(self.judge.read_ranked(question, hits))

    def p_yes(self, messages) -> float:
        return yes_probability(self.backend.first_token_probabilities(messages, YES_NO))

    def window(self, question: str, golds, hits, position: int, role: str) -> dict:
        """One page read as a window of one, and its answer scored every way."""
        hit = hits[position]
        messages = prompt(question, (hit,), self.backend, self.settings)
        written = self._ask(messages, 48)["choices"][0]
        choice = choice_probabilities(written.get("logprobs"), ["ANSWER:", "NOT FOUND"]) or {}
        reply = parse_reply(written["message"]["content"])
        shown = " ".join(shown_sentences(hit, self.settings.page_tokens, self.backend.count_tokens))
        row = {
            "question": question,
            "page": hit.page.id,
            "role": role,
            "answer": reply.answer,
            "right": is_right(reply.answer, golds),
            "shown_holds_gold": is_positive(shown, golds),
            "reader": choice.get("ANSWER:"),
        }
        row["label"] = row["right"] and row["shown_holds_gold"]
        row["mentioned"] = bool(reply.answer) and mentions(f"{hit.page.title} {shown}", reply.answer)
        if not row["mentioned"] or not self.grade:
            return row
        answer, title = reply.answer, hit.page.title
        row["fresh"] = self.p_yes(grading_messages(question, answer, title, shown))
        row["focused"] = self.p_yes(grading_messages(question, answer, title, focused(shown, answer) or shown))
        row["claim"] = self.p_yes(claim_messages(question, answer, title, shown))
        asked = [*messages, {"role": "assistant", "content": reply.raw}, follow_up(hit.page.id, answer)]
        row["follow_up"] = self.p_yes(asked)
        reading = self._judged(question, hits)[position]
        agreed = bool(reading.answer) and agrees(answer, reading.answer)
        row["judge"] = (reading.support if reading.support is not None else reading.p_answer) if agreed else 0.0
        row["fresh+judge"] = row["fresh"] + row["judge"]
        return row


def best_precision_at_half(scored: list[tuple[float, bool]]) -> dict:
    """The best precision of a cut (score >= t) that keeps at least half of the right answers, with that cut."""
    rights = sum(label for _, label in scored)
    best = {"precision": None, "cut": None, "kept_right": 0}
    for cut in sorted({s for s, _ in scored}):
        kept = [label for s, label in scored if s >= cut]
        if (
            rights
            and sum(kept) * 2 >= rights
            and (best["precision"] is None or sum(kept) / len(kept) > best["precision"])
        ):
            best = {"precision": sum(kept) / len(kept), "cut": cut, "kept_right": sum(kept)}
    return best


def summarise_probes(rows: list[dict]) -> dict:
    graded = [r for r in rows if r["mentioned"]]
    out = {
        "windows": len(rows),
        "answered": sum(r["answer"] is not None for r in rows),
        "answered_on_answer_free_pages": sum(r["answer"] is not None for r in rows if r["role"] == "negative"),
        "answer_free_pages": sum(r["role"] == "negative" for r in rows),
        "gold_page_right": sum(r["right"] for r in rows if r["role"] == "gold"),
        "gold_pages": sum(r["role"] == "gold" for r in rows),
        "graded": len(graded),
        "graded_right": sum(r["label"] for r in graded),
        "signals": {},
    }
    for signal in PROBES:
        scored = [(r[signal], r["label"]) for r in graded if r.get(signal) is not None]
        positive, negative = [s for s, y in scored if y], [s for s, y in scored if not y]
        auc = auc_interval(negative, positive) if positive and negative else None
        out["signals"][signal] = {"auc": auc, "best_precision_at_half_coverage": best_precision_at_half(scored)}
    return out


FIRST_OR_TOP = re.compile(f"{FIRST.pattern}|{SUPERLATIVE.pattern}", re.IGNORECASE)  # what the narrowed rule reads


def contrast_scan(service, split: str = "dev") -> dict:
    """How often the contrast rules (raqa/reading/contrast.py) would turn a gold answer red on a page that holds it: for
    each NQ-open and TriviaQA question with a superlative, "capital of" or "first", the first gold spelling each of
    BM25's top 15 pages contains as "readable" counts it (not one that only repeats the question, "Capital of Belarus",
    which the grader refuses anyway). No model is asked. Every case listed is a gold answer turned red, even where its
    page states it only by implication ("third-largest island ..., after Cuba")."""
    checked, flagged = {"rank": 0, "scope": 0, "capital": 0, "narrowed": 0}, []
    for dataset in ("nq", "triviaqa"):
        for item in load_questions(dataset, split):
            rules = [
                r
                for r, asks in (
                    ("rank", SUPERLATIVE),
                    ("scope", WORLDWIDE),
                    ("capital", CAPITAL_OF),
                    ("narrowed", FIRST_OR_TOP),
                )
                if asks.search(item.question)
            ]
            if not rules:
                continue
            for hit in service.index.search(item.question, 15):
                # every spelling the page contains as "readable" counts it, less those that only repeat the question
                spellings = [g for g in item.answers if not restates_question(g, item.question)]
                gold = next((g for g in spellings if is_positive(hit.page.text, [g])), None)
                if gold is None:
                    continue
                for rule in rules:
                    checked[rule] += 1
                if found := contrast(item.question, hit.page.text, gold):
                    case = {"question": item.question, "gold": gold, "page": hit.page.title}
                    flagged.append({**case, "rule": found.rule, "says": found.says})
    turned = {rule: sum(1 for c in flagged if c["rule"] == rule) for rule in checked}
    return {
        "gold_mentions_checked": checked,
        "turned_red": turned,
        "cases": flagged,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.evaluation.grader_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--per-kind", type=int, default=16, help="readable questions a set (no-answer: half)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=FORMULATIONS_FILE)
    parser.add_argument("--shots", type=int, help="the reader's worked examples (default: the page's)")
    parser.add_argument("--reader-only", action="store_true", help="read the windows, grade nothing")
    parser.add_argument(
        "--contrast-scan", action="store_true", help="only count the gold answers the contrast rules turn red"
    )
    args = parser.parse_args(argv)
    from raqa.service import Service  # lazy: loads models

    if args.contrast_scan:
        service = Service.load(AppConfig.from_env(), progress=lambda m: print(m, file=sys.stderr), load_model=False)
        out = args.out if args.out != FORMULATIONS_FILE else RESULTS_DIR / "contrast-rules.json"
        command = command_line("lab.evaluation.grader_probe", contrast_scan=True)
        data = (
            'NQ-open and TriviaQA dev questions with a superlative, "capital of" or "first"; BM25\'s top 15 over the '
            "embedded lead sections"
        )
        write_json(
            out,
            {
                "measurement": "contrast rules",
                "command": command,
                "data": data,
                **provenance(),
                "results": contrast_scan(service),
            },
        )
        return 0
    service = Service.load(AppConfig.from_env(), progress=lambda m: print(m, file=sys.stderr))
    probe = Probe(service, args.shots, grade=not args.reader_only)
    rows_path = args.out.with_suffix(".rows.jsonl")
    done = {(r["question"], r["page"]): r for r in map(json.loads, rows_path.open())} if rows_path.exists() else {}
    rows = []
    with rows_path.open("a") as sink:
        for dataset in ("nq", "triviaqa"):
            for item, kind in draw(
                service, dataset, "dev", per_kind=args.per_kind, seed=args.seed, no_answer=args.per_kind // 2
            ):
                hits = tuple(probe.search(item.question, 15))
                holds = [is_positive(h.page.text, item.answers) for h in hits]
                chosen = [(i, "gold") for i in range(len(hits)) if holds[i]][:1]
                chosen += [(i, "negative") for i in range(len(hits)) if not holds[i]][:NEGATIVE_PAGES]
                for position, role in chosen:
                    row = done.get((item.question, hits[position].page.id))
                    if row is None:
                        read = probe.window(item.question, item.answers, hits, position, role)
                        row = {"dataset": dataset, "kind": kind, **read}
                        sink.write(json.dumps(row) + "\n")
                        sink.flush()
                    rows.append(row)
                    print(f"{dataset} {role}: {item.question} -> {row['answer']} ({row.get('fresh')})", file=sys.stderr)
    record = {
        "measurement": "grader formulations",
        "command": command_line(
            "lab.evaluation.grader_probe",
            per_kind=args.per_kind,
            seed=args.seed,
            out=None if args.out == FORMULATIONS_FILE else args.out,
            shots=args.shots,
            reader_only=args.reader_only,
        ),
        "data": f"NQ-open and TriviaQA dev, seed {args.seed}, {args.per_kind} readable and {args.per_kind // 2} "
        "no-answer questions a set; per question the first of hybrid's top 15 pages holding a gold answer and the "
        f"first {NEGATIVE_PAGES} holding none, each read alone with the page's default reader and settings",
        "rows": str(rows_path.name),
        "shots": probe.settings.shots,
        **provenance(),
        "results": summarise_probes(rows),
    }
    write_json(args.out, record)
    print(json.dumps(record["results"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
