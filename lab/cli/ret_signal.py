"""`experiment ret_signal`: measure a candidate Adapt-LLM adapter's P(<RET>) against a baseline's on the pipeline
record's questions (evaluation/ret_signal.py), and write the comparison as a result record.

With --update-record the pipeline record is scored again with the candidate's P(<RET>) in every row (nothing
else in a row depends on the adapter: the closed-book answer, its other signals and the readers' endings are the
base model's), and the examples' P(<RET>) for the page's slider are measured again. Use it when the candidate has
replaced the adapter under assets/adapt/adapt.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab.cli.evaluator import Evaluation, Measurement, Ready, evaluate
from lab.cli.progress import counter_bar
from lab.evaluation.ret_signal import compare, rescored_rows, ret_probabilities
from lab.evaluation.when_to_retrieve import example_decisions
from lab.evaluation.when_to_retrieve_scores import summarise_scores
from lab.records import write_json
from lab.training.when_to_retrieve_data import read_labelled
from raqa.cli.output import say
from raqa.evaluation import records
from raqa.models.base import ModelError

BASELINE_NAME = "baseline"
CANDIDATE_NAME = "adapt"  # the name the pipeline's adapt policy asks for, so --update-record can reuse it


def _check(args: argparse.Namespace) -> dict:
    """The record, after checking every path; ValueError saying what is wrong."""
    for label, folder in (("--candidate", args.candidate), ("--baseline", args.baseline)):
        if not (Path(folder) / "adapter_config.json").is_file():
            raise ValueError(f"{label} {folder}: not a peft adapter folder (no adapter_config.json).")
    if not Path(args.training).is_file():
        raise ValueError(f"--training {args.training}: no such file.")
    try:
        record = json.loads(Path(args.record).read_text(encoding="utf-8"))
        rows = record["results"]["rows"]
        if not rows["test"] or not rows["dev"]:
            raise KeyError("rows")
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"--record {args.record}: not a pipeline record with dev and test rows ({e}).") from None
    return record


def _load(args: argparse.Namespace):
    from peft import PeftModel

    from raqa.models.local import TransformersBackend, peft_loading  # lazy: imports torch
    from raqa.when_to_retrieve.model import GreedyModel  # lazy: imports torch

    cache = Path(args.cache) if args.cache else None
    base = TransformersBackend.load(None, None, cache, say)
    with peft_loading():
        model = PeftModel.from_pretrained(base.model, args.baseline, adapter_name=BASELINE_NAME)
        model.load_adapter(args.candidate, adapter_name=CANDIDATE_NAME)
    return GreedyModel(model, base.tokenizer, f"{base.name} + Adapt-LLM adapters")


def _question_groups(rows: dict, sets: list[str], training) -> dict[str, tuple[list, list, list]]:
    """name -> (questions, needs retrieval, (dataset, split, id) keys): each test and dev set, and the training
    questions (needs retrieval: the closed-book answer was wrong; for training: the question was not known)."""
    groups = {}
    for split in ("test", "dev"):
        for dataset in sets:
            chosen = [r for r in rows[split] if r["dataset"] == dataset]
            groups[f"{split}:{dataset}"] = (
                [r["question"] for r in chosen],
                [not r["closed_book"]["correct"] for r in chosen],
                [(r["dataset"], r["split"], r["id"]) for r in chosen],
            )
    groups["training"] = (
        [x.question for x in training],
        [not x.known for x in training],
        [(x.dataset, "dev", x.id) for x in training],
    )
    return groups


def _prepare(args: argparse.Namespace) -> Ready:
    record = _check(args)
    training = read_labelled(args.training)
    try:
        model = _load(args)
    except (ModelError, OSError, ValueError, RuntimeError) as e:
        raise ValueError(f"Could not load the adapters: {type(e).__name__}: {e}") from e
    return Ready(loaded={"record": record, "training": training, "model": model})


def _measure(args: argparse.Namespace, ready: Ready, command: str) -> Measurement:
    record, model = ready.loaded["record"], ready.loaded["model"]
    rows = record["results"]["rows"]
    sets = sorted({r["dataset"] for r in rows["test"]})
    groups: dict[str, dict] = {}
    for name, (questions, needs, keys) in _question_groups(rows, sets, ready.loaded["training"]).items():
        group = {"needs": needs, "keys": keys}
        for adapter, label in ((BASELINE_NAME, "baseline"), (CANDIDATE_NAME, "candidate")):
            with counter_bar(f"P(<RET>) {label}, {name}", len(questions)) as bar:
                group[label] = ret_probabilities(model, questions, adapter, lambda: bar.update(1))
        groups[name] = group
    recorded = {
        d: [1.0 - r["closed_book"]["signals"]["not_ret"] for r in rows["test"] if r["dataset"] == d] for d in sets
    }
    results = compare({n: {k: g[k] for k in ("needs", "baseline", "candidate")} for n, g in groups.items()}, recorded)
    results["questions"] = {
        n: [
            {"key": list(k), "needs_retrieval": need, "baseline": a, "candidate": b}
            for k, need, a, b in zip(g["keys"], g["needs"], g["baseline"], g["candidate"], strict=True)
        ]
        for n, g in groups.items()
    }
    about = {
        "sample": {"record": args.record, "record_command": record.get("command"), "training": args.training},
        "model": model.name,
        "corpus": "none: P(<RET>) is asked of the question alone",
        "adapters": {
            label: _card_command(folder)
            for label, folder in (("baseline", args.baseline), ("candidate", args.candidate))
        },
    }

    def then(path: Path) -> None:
        summary = {n: g["auc"] for n, g in results["groups"].items()}
        higher = results["candidate_higher_on_every_test_set"]
        print(json.dumps({"candidate_higher_on_every_test_set": higher, "auc": summary}, indent=1))
        if args.update_record:
            questions = (q for n, qs in results["questions"].items() if n != "training" for q in qs)
            _update_record(args, record, model, {tuple(q["key"]): q["candidate"] for q in questions}, command)

    return Measurement(results, record.get("dataset", "pipeline"), about, then)


RET_SIGNAL = Evaluation("ret_signal", ("candidate", "baseline", "record", "training"), _prepare, _measure)


def cmd_compare_ret(args: argparse.Namespace) -> int:
    return evaluate(RET_SIGNAL, args)


def _card_command(folder: str) -> str | None:
    from raqa.when_to_retrieve.model import adapter_card  # lazy: imports torch

    return adapter_card(Path(folder)).get("command")


def _update_record(args, record: dict, model, p_ret: dict, command: str) -> None:
    """The pipeline record scored again with the candidate's P(<RET>) in every row, and its examples measured."""

    rows = record["results"]["rows"]
    results = summarise_scores(rescored_rows(rows["dev"], p_ret), rescored_rows(rows["test"], p_ret))
    results["examples"] = example_decisions(model, results)
    rescored = {
        "what": "not_ret (1 - P(<RET>)) of every row recomputed with the candidate adapter, every policy scored "
        "again; the closed-book answers, the other signals and the readers' endings are the rows' own",
        "command": f"{command} --update-record",
        "adapter": _card_command(args.candidate),
        **records.provenance(),
    }
    updated = {**record, "results": results, "rescored": rescored}
    write_json(Path(args.record), updated)
    say(f"rescored {args.record}")
