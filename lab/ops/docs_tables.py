"""The docs' measured tables, each a function from committed files to Markdown (python -m lab.ops.render_docs
writes them into docs/ between their markers; tests/test_docs.py holds the pages to them).

This module holds the quality tables of reading and when to retrieve and the helpers every table uses; the answer
judge's are in docs_tables_judge.py, the speed, reliability, server and limits tables in docs_tables_ops.py, and
render_docs.py lists them all. Every
table starts by naming the file it reads and the command that remakes that file. Where a module already formats its
record (attribution, the judge card), the table is that module's. Left out: the pages' prose, and running anything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

from lab.evaluation.attribution_eval import attribution_markdown
from lab.records import ROOT
from raqa.when_to_retrieve.pipeline import PIPELINE_TITLES
from raqa.when_to_retrieve.uncertainty import SIGNAL_TITLES


def load_record(path: str) -> dict:
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def source_line(path: str, record: dict) -> str:
    """Which file a table is read from and the command that remakes that file, with its code version and date."""
    when = record.get("created") or record.get("date") or ""
    version = f", {record['code_version']}, {when[:10]}" if record.get("code_version") else ""
    return f"`{path}`, made by `{record['command']}`{version}"


def made_by(path: str, record: dict) -> str:
    return f"From {source_line(path, record)}:"


def share(e: Mapping, digits: int = 1, n: bool = True) -> str:
    """A share with its 95% interval: 5.2% [2.0%, 12.6%] (n = 77); a dash where nothing was counted."""
    if not e.get("n") or e.get("value") is None or math.isnan(e["value"]):
        return "– (n = 0)"
    count = f" (n = {e['n']})" if n else ""
    return f"{e['value']:.{digits}%} [{e['low']:.{digits}%}, {e['high']:.{digits}%}]{count}"


def _points(diff: Mapping) -> str:
    """A difference of shares in percentage points with its interval: +6.8 points [+2.0, +11.8]."""
    return f"{diff['value'] * 100:+.1f} points [{diff['low'] * 100:+.1f}, {diff['high'] * 100:+.1f}]"


def markdown_rows(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    header = list(header)
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def attribution() -> str:
    path = "assets/results/attribution-triviaqa.json"
    record = load_record(path)
    r = record["results"]
    cost, longest = r["seconds_per_window"], r["seconds_per_window_max"]
    return "\n".join(
        [
            made_by(path, record),
            "",
            attribution_markdown(r),
            "",
            f"Cost, measured in the same run: {cost['value']:.1f} s a window on average [{cost['low']:.1f}, "
            f"{cost['high']:.1f}] (n = {cost['n']}), at most {longest:.1f} s.",
        ]
    )


NEGATIVE_COLUMNS = (
    ("answers on answer-free windows", "false_answer_rate_on_negative"),
    ("declines on answer-bearing windows", "declined_on_positive"),
    ("exact match on answer-bearing windows", "exact_match_on_positive"),
)


def negative_windows_table() -> str:
    path = "assets/results/negative_windows-triviaqa.json"
    record = load_record(path)
    rows = [[str(r["shots"])] + [share(r[key], 0) for _, key in NEGATIVE_COLUMNS] for r in record["results"]["rows"]]
    header = ["worked examples in the prompt"] + [label for label, _ in NEGATIVE_COLUMNS]
    return "\n".join([made_by(path, record), "", *markdown_rows(header, rows)])


def readers() -> str:
    path = "assets/results/reader_comparison-triviaqa-w1.json"
    record = load_record(path)
    rows = [
        [f"{r['label']} (`{name}`)"]
        + [share(r["windows"][key], 0) for _, key in NEGATIVE_COLUMNS]
        + [f"{r['windows']['auc_p_answer']:.3f}"]
        for name, r in record["results"]["readers"].items()
    ]
    header = ["reader", *(label for label, _ in NEGATIVE_COLUMNS), "P(answer) AUC, answer-bearing vs answer-free"]
    return "\n".join([made_by(path, record), "", *markdown_rows(header, rows)])


def adapters() -> str:
    cards = {name: load_record(f"assets/adapt/{name}/raqa_adapter.json") for name in ("adapt-unbalanced", "adapt")}
    rows = []
    for name, card in cards.items():
        data, training = card["data"], card["training"]
        repeated = card.get("class_balance", {}).get("known_repeated")
        rows.append(
            [
                f"`assets/adapt/{name}`",
                f"{data['known_zero_shot']} of {data['questions']}",
                f"{data['ret_target_share']:.1%}",
                f"{repeated}x" if repeated else "no",
                f"{training['examples']:,}",
                f"{training['seconds'] / 60:.0f} min",
            ]
        )
    header = (
        "adapter",
        "training questions the model knows",
        "`<RET>` targets before balancing",
        "known answers repeated",
        "examples",
        "training",
    )
    made = [f"- `assets/adapt/{name}/raqa_adapter.json`, made by `{card['command']}`" for name, card in cards.items()]
    return "\n".join(["From the adapters' cards:", *made, "", *markdown_rows(header, rows)])


def ret_signal() -> str:
    path = "assets/results/ret_signal-nq+triviaqa.json"
    record = load_record(path)
    groups = record["results"]["groups"]
    names = {
        "test:nq": "NQ test",
        "test:triviaqa": "TriviaQA test",
        "dev:nq": "NQ dev (threshold choice)",
        "dev:triviaqa": "TriviaQA dev (threshold choice)",
        "training": 'Algorithm 1\'s training questions (in sample, against "not known")',
    }
    rows = []
    for key, g in groups.items():
        a, d, s = g["auc"], g["auc"]["difference"], g["spread"]
        rows.append(
            [
                names.get(key, key),
                f"{a['n']} ({a['needs_retrieval']})",
                f"{a['baseline']['value']:.3f}",
                f"{a['candidate']['value']:.3f}",
                f"{d['value']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]",
                f"{s['baseline']['median']:.2f} → {s['candidate']['median']:.2f}",
            ]
        )
    header = ("questions", "n (closed-book wrong)", "first adapter", "class-balanced", "difference", "median P(<RET>)")
    return "\n".join([made_by(path, record), "", *markdown_rows(header, rows)])


ADAPT = "pipeline:adapt:base+judge"
PIPELINE_ROWS = (
    "never",
    "always:base",
    "always:base+judge",
    "pipeline:adapt:base",
    "pipeline:adapt:base+judge",
    "pipeline:mean_entropy:base+judge",
    "pipeline:token_probability:base+judge",
)


def _configuration(name: str) -> str:
    parts = name.split(":")
    reader = {"base": "base reader", "base+judge": "model + judge"}.get(parts[-1], parts[-1])
    if parts[0] == "always":
        return f"always retrieve, {reader}"
    if parts[0] == "pipeline":
        return f"pipeline, {PIPELINE_TITLES.get(parts[1], parts[1])}, {reader}"
    return "never retrieve (closed-book)"


def pipeline_table() -> str:
    path = "assets/results/pipeline-nq+triviaqa.json"
    record = load_record(path)
    sets = {name: {**scores, "name": name} for name, scores in record["results"]["datasets"].items()}
    dev = record["results"]["rows"]["dev"]
    header = ["configuration"] + [
        f"{d} {m}" for d in sets for m in ("coverage", "accuracy among answered", '"I don\'t know", unanswerable')
    ]
    rows = []
    for name in PIPELINE_ROWS:
        cells = [_configuration(name)]
        for s in sets.values():
            t = s["table"][name]
            cells += [
                f"{t['coverage']['value']:.1%}",
                share(t["selective_accuracy"], n=False),
                f"{t['idk_unanswerable']['value']:.1%}",
            ]
        rows.append(cells)
    lines = [made_by(path, record)]
    if "rescored" in record:  # scored again with another adapter's P(<RET>)
        lines = [f"{lines[0][:-1]}, then P(<RET>) of the class-balanced adapter by `{record['rescored']['command']}`:"]
    hours = f" ({record['seconds'] / 3600:.1f} h on {record['machine']['cpus']} cores for the evaluation)"
    lines[0] = lines[0].replace("`, raqa", f"`{hours}, raqa", 1)
    lines += ["", *markdown_rows(header, rows), ""]
    signal_rows = [
        [SIGNAL_TITLES.get(k, k)]
        + [f"{s['auc'][k]['value']:.3f} [{s['auc'][k]['low']:.2f}, {s['auc'][k]['high']:.2f}]" for s in sets.values()]
        for k in next(iter(sets.values()))["auc"]
    ]
    lines += markdown_rows(["signal: AUC at ranking wrong closed-book answers"] + list(sets), signal_rows)
    targets = [
        (
            'best pipeline that can say "I don\'t know": accuracy among answered minus always retrieve (base reader)',
            lambda s: _best(s, "best_abstaining_pipeline", "best_abstaining_minus_always_base"),
        ),
        (
            "best pipeline at always retrieve's coverage (base reader): the same difference",
            lambda s: _best(s, "best_pipeline", "selective_accuracy_minus_always_base"),
        ),
        (
            "best configuration at always retrieve's coverage (base reader)",
            lambda s: _configuration(s["targets"]["best_configuration_at_always_base_coverage"]),
        ),
        ("questions (dev questions for thresholds)", lambda s: f"{s['n']} ({s['dev_n']})"),
        ("unanswerable (no page of the corpus holds a gold answer)", lambda s: str(s["n"] - s["answerable"])),
        ("closed-book answer right", lambda s: share(s["closed_book_correct"])),
        (
            "right closed-book answers among the dev questions the thresholds were chosen on",
            lambda s: str(sum(r["closed_book"]["correct"] for r in dev if r["dataset"] == s["name"])),
        ),
        (
            "Adapt-LLM's P(<RET>) threshold chosen on dev; test questions it retrieves on (model + judge)",
            lambda s: f"{s['configurations'][ADAPT]['threshold']:.2f}; {share(s['table'][ADAPT]['retrieval_rate'])}",
        ),
    ]
    lines += ["", *markdown_rows(["", *sets], [[label] + [cell(s) for s in sets.values()] for label, cell in targets])]
    return "\n".join(lines)


def _best(scores: dict, best: str, difference: str) -> str:
    name = scores["targets"][best]
    return (
        f"{_configuration(name)}, {scores['table'][name]['coverage']['value']:.1%} coverage: "
        f"{_points(scores['targets'][difference])}"
    )
