"""The judge's verbs (train judge, train judge-gate, train support): check the numbers, then hand over to lab.training
(torch loads there). The judge research that did not ship (compare-judges, train-verifier, judge-labels,
gate-with-model, mined negatives) was retired once the badge came from the 1.5B's grader; its records stay in
assets/results and name the commit that made them.

Each prints a short JSON summary on stdout; exit status 2 on bad input. With --measure-only, train judge refits
(p_answer, threshold) and measures again a trained judge folder, no training.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab.records import command_line, stated
from lab.training.judge import JudgeSettings, remeasure, train_judge
from lab.training.judge_gate import calibrate_folder
from lab.training.support_fit import fit_folder
from raqa.cli.output import error, say
from raqa.config import default_cache_dir
from raqa.models.base import ModelError

# the judge's settings that the options name alike, the first six stated in every command (the order records have)
JUDGE_SETTINGS = ("method", "epochs", "lr", "batch", "max_tokens", "per_question", "depth", "min_shared", "seed")


def _judge_settings(args: argparse.Namespace) -> JudgeSettings:
    """The judge's settings from the options; ValueError saying which option is out of range."""
    settings = JudgeSettings(**stated(args, *JUDGE_SETTINGS, "rank", "alpha", "threads", "checkpoint_every"))
    settings.check()
    if (args.limit is not None and args.limit < 2) or args.holdout < 10 or args.test_pairs < 10:
        raise ValueError("--limit must be 2 or more, --holdout and --test-pairs 10 or more.")
    return settings


def _judge_command(args: argparse.Namespace) -> str:
    """The rerun command: the options off their defaults, the LoRA ones only for --method lora."""
    lora = args.method == "lora"
    return command_line(
        "train judge",
        **stated(args, *JUDGE_SETTINGS[:6]),
        depth=args.depth if args.depth != 15 else None,
        min_shared=args.min_shared if args.min_shared != 1 else None,
        checkpoint_every=args.checkpoint_every or None,
        rank=args.rank if lora else None,
        alpha=args.alpha if lora else None,
        **stated(args, "limit", "holdout", "test_pairs", "seed", "out"),
    )


def _judge_summary(card: dict) -> str:
    tests = card["test"].items()
    return json.dumps(
        {
            "threshold": card["threshold"],
            "auc": {d: round(m["auc"]["value"], 3) for d, m in tests},
            "exact_match": {d: round(m["exact_match"]["value"], 3) for d, m in tests},
            "ms_per_page": card["timing"]["ms_per_page"],
            "wall_seconds": card["wall_seconds"],
        },
        indent=1,
    )


def cmd_train_judge(args: argparse.Namespace) -> int:
    out, cache = Path(args.out), Path(args.cache) if args.cache else default_cache_dir()
    try:
        settings = _judge_settings(args)
        if args.measure_only:
            card = remeasure(out, cache, command_line("train judge", measure_only=True, out=args.out), say)
        else:
            sizes = {"limit": args.limit, "holdout": args.holdout, "test_per_kind": args.test_pairs}
            card = train_judge(out, settings, cache, command=_judge_command(args), say=say, **sizes)
    except (ValueError, ModelError) as e:
        return error(e)
    print(_judge_summary(card))
    return 0


def cmd_calibrate_judge(args: argparse.Namespace) -> int:
    """Write the model + judge reader's gate per window size into the judge's card; JSON summary on stdout."""

    if not 0 < args.max_false < 1:
        return error(f"--max-false must be between 0 and 1, got {args.max_false}.")
    command = command_line("train judge-gate", max_false=args.max_false, out=args.out)
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
    command = command_line("train support", **stated(args, "precision", "max_unanswerable", "folds", "out"))
    cache = Path(args.cache or default_cache_dir())
    try:
        limits = {"folds": args.folds, "precision": args.precision, "max_unanswerable": args.max_unanswerable}
        model = fit_folder(Path(args.out), cache, command, say=say, **limits)
    except (ModelError, KeyError) as e:
        return error(e)
    print(
        json.dumps({"weak": model.weak, "answered": model.answered, "auc": model.card["auc"], "dev": model.card["dev"]})
    )
    return 0
