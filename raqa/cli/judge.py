"""The judge's verbs (train-judge, calibrate-judge, fit-support, compare-judges, train-verifier, judge-labels,
gate-with-model): check the numbers, then hand over to raqa.training (torch loads there).

Each prints a short JSON summary on stdout; exit status 2 on bad input. With --measure-only, train-judge refits
(p_answer, threshold) and measures again a trained judge folder, no training.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from raqa.cli.output import error, say
from raqa.config import default_cache_dir
from raqa.evaluation import records
from raqa.evaluation.records import command_line
from raqa.models.base import ModelError
from raqa.reading.judge import CARD_FILE, JUDGE_DIR
from raqa.training import judge_compare, label_audit
from raqa.training.judge import JudgeSettings, remeasure, train_judge
from raqa.training.judge_gate import calibrate_folder
from raqa.training.support_fit import fit_folder
from raqa.training.verifier import VerifierSettings, train_verifier


def cmd_train_judge(args: argparse.Namespace) -> int:
    settings = JudgeSettings(
        method=args.method,
        epochs=args.epochs,
        lr=args.lr,
        batch=args.batch,
        max_tokens=args.max_tokens,
        rank=args.rank,
        alpha=args.alpha,
        per_question=args.per_question,
        depth=args.depth,
        min_shared=args.min_shared,
        mined=args.mined,
        seed=args.seed,
        threads=args.threads,
        checkpoint_every=args.checkpoint_every,
    )
    try:
        settings.check()
        if (args.limit is not None and args.limit < 2) or args.holdout < 10 or args.test_pairs < 10:
            raise ValueError("--limit must be 2 or more, --holdout and --test-pairs 10 or more.")
        if args.init and args.method != "full":
            raise ValueError("--init goes on from a full judge: use it with --method full.")
        if args.init and not (Path(args.init) / CARD_FILE).is_file():
            raise ValueError(f"--init: no judge at {args.init} (expected {CARD_FILE}).")
    except ValueError as e:
        return error(e)
    lora = args.method == "lora"
    command = command_line(
        "train-judge",
        method=args.method,
        epochs=args.epochs,
        lr=args.lr,
        batch=args.batch,
        max_tokens=args.max_tokens,
        per_question=args.per_question,
        depth=args.depth if args.depth != 15 else None,
        min_shared=args.min_shared if args.min_shared != 1 else None,
        mined=args.mined or None,
        init=args.init,
        checkpoint_every=args.checkpoint_every or None,
        rank=args.rank if lora else None,
        alpha=args.alpha if lora else None,
        limit=args.limit,
        holdout=args.holdout,
        test_pairs=args.test_pairs,
        seed=args.seed,
        out=args.out,
    )
    cache = Path(args.cache) if args.cache else default_cache_dir()
    if args.measure_only:
        try:
            card = remeasure(Path(args.out), cache, command_line("train-judge", measure_only=True, out=args.out), say)
        except ModelError as e:
            return error(e)
    else:
        init = Path(args.init) if args.init else None
        card = train_judge(
            Path(args.out), settings, cache, command, args.limit, args.holdout, args.test_pairs, say=say, init=init
        )
    summary = {
        "threshold": card["threshold"],
        "auc": {d: round(m["auc"]["value"], 3) for d, m in card["test"].items()},
        "exact_match": {d: round(m["exact_match"]["value"], 3) for d, m in card["test"].items()},
        "ms_per_page": card["timing"]["ms_per_page"],
        "wall_seconds": card["wall_seconds"],
    }
    print(json.dumps(summary, indent=1))
    return 0


def cmd_calibrate_judge(args: argparse.Namespace) -> int:
    """Write the model + judge reader's gate per window size into the judge's card; JSON summary on stdout."""

    if not 0 < args.max_false < 1:
        return error(f"--max-false must be between 0 and 1, got {args.max_false}.")
    command = command_line("calibrate-judge", max_false=args.max_false, out=args.out)
    try:
        gate = calibrate_folder(Path(args.out), Path(args.cache or default_cache_dir()), command, args.max_false, say)
    except ModelError as e:
        return error(e)
    print(json.dumps({"thresholds": gate["thresholds"], "windows": gate["windows"]}))
    return 0


def cmd_fit_support(args: argparse.Namespace) -> int:
    """Fit the judge's support model and the badge's thresholds (support.json); JSON summary on stdout."""

    if not 0 < args.precision <= 1 or not 0 <= args.max_unanswerable <= 1 or not 2 <= args.folds <= 20:
        return error("--precision must be in (0, 1], --max-unanswerable in [0, 1], --folds from 2 to 20.")
    command = command_line(
        "fit-support", precision=args.precision, max_unanswerable=args.max_unanswerable, folds=args.folds, out=args.out
    )
    cache = Path(args.cache or default_cache_dir())
    try:
        model = fit_folder(Path(args.out), cache, command, args.folds, args.precision, args.max_unanswerable, say)
    except (ModelError, KeyError) as e:
        return error(e)
    print(
        json.dumps({"weak": model.weak, "answered": model.answered, "auc": model.card["auc"], "dev": model.card["dev"]})
    )
    return 0


def cmd_compare_judges(args: argparse.Namespace) -> int:
    """Measure judge folders in one run (training/judge_compare.py) and write the record; JSON summary on stdout."""

    folders = [Path(f) for f in args.folders]
    missing = [str(f) for f in folders if not (f / CARD_FILE).is_file()]
    if missing or len(set(folders)) != len(folders) or not 10 <= args.limit <= 3000:
        return error(
            f"No judge at {', '.join(missing)} (expected {CARD_FILE})."
            if missing
            else "Give distinct judge folders and --limit from 10 to 3000."
        )
    command = command_line("compare-judges", *args.folders, limit=args.limit, seed=args.seed)
    started = time.perf_counter()
    try:
        measured = judge_compare.compare(folders, Path(args.cache or default_cache_dir()), args.limit, args.seed, say)
    except ModelError as e:
        return error(e)
    about = {
        "command": command,
        "model": "answer judges (MiniLM QA head): " + ", ".join(args.folders),
        "judges": measured["judges"],
        "corpus": measured["corpus"],
        "sample": {"questions_per_set": args.limit, "pages_per_kind": args.limit, "seed": args.seed, "split": "test"},
        "seconds": round(time.perf_counter() - started, 1),
    }
    path = records.write("judges", "nq+triviaqa", measured["results"], about, Path(args.out))
    summary = {
        d: {f: round(m["per_question"]["best_right"]["value"], 3) for f, m in per.items()}
        for d, per in measured["results"].items()
    }
    print(json.dumps({"record": str(path), "best_extraction_right": summary}))
    return 0


def cmd_train_verifier(args: argparse.Namespace) -> int:
    """Train and measure the answer verifier (training/verifier.py); write its card; JSON summary on stdout."""
    settings = VerifierSettings(args.train_questions, args.eval_questions, args.epochs, args.lr, args.batch, args.seed)
    if not (10 <= settings.train_questions <= 20000 and 10 <= settings.eval_questions <= 500):
        return error("Give --train-questions from 10 to 20000 and --eval-questions from 10 to 500.")
    if not (1 <= settings.epochs <= 10 and 0 < settings.lr < 1 and 1 <= settings.batch <= 512):
        return error("Give --epochs from 1 to 10, --lr between 0 and 1 and --batch from 1 to 512.")
    command = command_line("train-verifier", **vars(settings), out=args.out)
    try:
        card = train_verifier(Path(args.cache or default_cache_dir()), settings, Path(args.out), command, say)
    except ModelError as e:
        return error(e)
    print(json.dumps({"card": str(Path(args.out) / "card.json"), "auc": card["measured"]["auc"]}))
    return 0


def cmd_judge_labels(args: argparse.Namespace) -> int:
    """Draw positive labels to read by hand into a new JSON-lines file, or count read files into a summary card."""
    out = Path(args.out)
    if args.summarise:
        try:
            files = {str(Path(f)): label_audit.read_rows(Path(f)) for f in args.summarise}
        except (OSError, ValueError) as e:
            return error(e)
        card = {
            "command": command_line("judge-labels", "--summarise", *files, out=args.out),
            "files": {
                name: {"drawn_by": sorted({r.get("drawn_by", "") for r in rows}), **label_audit.summarise(rows)}
                for name, rows in files.items()
            },
            **records.provenance(),
        }
        records.write_json(out, card)
        print(json.dumps({name: summary["rules"] for name, summary in card["files"].items()}))
        return 0
    if not 1 <= args.sample <= 1000:
        return error("Give --sample from 1 to 1000.")
    if out.exists():
        return error(f"{out} exists: it may hold a reading; draw into a new file.")
    from raqa.evaluation.positives import PositiveIndex
    from raqa.retrieval.corpus import load_corpus
    from raqa.retrieval.index import load_or_build

    pages = load_corpus(None)
    index = load_or_build(pages, Path(args.cache or default_cache_dir()), progress=lambda message, fraction: None)
    command = command_line("judge-labels", source=args.source, sample=args.sample, seed=args.seed, out=args.out)
    split = json.loads((JUDGE_DIR / CARD_FILE).read_text())  # the shipped judge's dev split: its seed and held-out
    questions = label_audit.source_questions(
        args.source, split["holdout_questions"], args.seed, split["settings"]["seed"]
    )
    rows = label_audit.draw(questions, index, PositiveIndex(pages), args.sample)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps({**r, "drawn_by": command}, ensure_ascii=False) + "\n" for r in rows))
    say(f"{len(rows)} labels to read in {out}: set answers_question to true or false on each line")
    return 0


def cmd_gate_with_model(args: argparse.Namespace) -> int:
    """Read held-out dev pages with the model at a low gate and score candidate gates (training/gate_with_model.py)."""
    if not (1 <= args.questions <= 500 and 0 < args.floor < 1):
        return error("Give --questions from 1 to 500 and --floor between 0 and 1.")
    from tqdm import tqdm

    from raqa.cli.options import app_config
    from raqa.config import RunSettings
    from raqa.evaluation.positives import PositiveIndex
    from raqa.service import Service  # lazy: imports torch
    from raqa.training import gate_with_model
    from raqa.training.judge_data import dev_questions

    start = time.time()
    try:
        service = Service.load(app_config(args), progress=say)
        reader, backend, base, judge = service.reading(None, RunSettings())
        if judge is None or judge.support is None:
            raise ModelError("gate-with-model needs the answer judge with its support model.")
    except (ValueError, ModelError) as e:
        return error(e)
    if args.questions > judge.card["holdout_questions"]:
        return error(f"--questions: the judge holds out {judge.card['holdout_questions']} dev questions a set.")
    held = dev_questions(judge.card["settings"]["seed"])
    items = [(d, item) for d, questions in held.items() for item in questions[: args.questions]]
    settings = base.replace(judge_threshold=args.floor, gate_threshold=args.floor, answered_threshold=None)
    rows = gate_with_model.collect(
        items,
        lambda work: tqdm(work, desc="dev questions", unit="q"),
        index=service.index,
        backend=backend,
        settings=settings,
        judge=judge,
        positives=PositiveIndex(service.pages),
        floor=args.floor,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    swept = gate_with_model.sweep(rows, floor=args.floor)
    record = {
        "command": command_line("gate-with-model", questions=args.questions, floor=args.floor, out=args.out),
        "data": f"the first {args.questions} held-out dev questions of train-judge a set (NQ-open, TriviaQA dev)",
        "reader": reader.name,
        "model": backend.name,
        "shipped_gate": judge.support.weak,
        "lowest_gate_at_20_percent": gate_with_model.lowest_gate(swept, 0.2),
        "model_calls": sum(len(r["pages"]) for r in rows),
        "seconds": round(time.time() - start, 1),
        **records.provenance(),
        "results": {d: gate_with_model.sweep([r for r in rows if r["dataset"] == d], floor=args.floor) for d in held}
        | {"all": swept},
    }
    records.write_json(out / "record.json", record)
    print(
        json.dumps({"lowest_gate_at_20_percent": record["lowest_gate_at_20_percent"], "calls": record["model_calls"]})
    )
    return 0
