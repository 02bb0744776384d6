"""`train reader` and `train adapt`: check the numbers, then hand over to lab.training (torch loads there).

Each prints a short JSON summary on stdout; exit status 2 on bad input, before any data is built.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from lab.records import command_line, stated
from lab.training import reader as reader_training  # by module: tests replace its train_reader
from lab.training.lora import ADAPT_LORA, READER_LORA
from lab.training.when_to_retrieve_data import ADAPTER_KINDS
from raqa.cli.output import error, say
from raqa.config import default_cache_dir

LORA = ("rank", "alpha", "lr", "epochs", "seed")  # the LoRA settings both trainers take as the options name them


def _cache(args: argparse.Namespace) -> Path:
    return Path(args.cache) if args.cache else default_cache_dir()


def cmd_train_reader(args: argparse.Namespace) -> int:
    if args.limit < 4 or args.epochs < 1 or args.calibration < 1 or not 0 <= args.verdict_weight <= 1:
        return error("--limit must be at least 4, --epochs and --calibration at least 1, --verdict-weight from 0 to 1.")
    # train reader calls the windows per optimiser step --accumulation
    settings = replace(READER_LORA, **stated(args, *LORA, "verdict_weight", "page_tokens"), batch=args.accumulation)
    options = ("limit", "epochs", "lr", "rank", "alpha", "accumulation", "verdict_weight", "page_tokens")
    command = command_line("train reader", **stated(args, *options, "calibration", "seed", "out"))
    where = {"cache_dir": _cache(args), "command": command, "calibration_per_kind": args.calibration}
    card = reader_training.train_reader(Path(args.out), args.limit, settings, say=say, **where)
    print(json.dumps({k: card[k] for k in ("answer_threshold", "calibration", "wall_seconds")}, indent=1))
    return 0


def _adapt_choices(args: argparse.Namespace) -> dict:
    """The training sets, the adapters --kinds asks for, the balance and the labels file, after checking the options;
    ValueError saying which is wrong."""
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    if args.limit < 1:
        raise ValueError(f"--limit must be 1 or more, got {args.limit}.")
    if not kinds or any(k not in ADAPTER_KINDS for k in kinds):
        raise ValueError(f"Invalid --kinds {args.kinds!r}. Choose from: {', '.join(ADAPTER_KINDS)} (comma-separated).")
    if args.labels and not Path(args.labels).is_file():
        raise ValueError(f"--labels {args.labels}: no such file.")
    labels = Path(args.labels) if args.labels else None
    return {"datasets": tuple(args.datasets), "kinds": kinds, "balance": args.balance, "labels": labels}


def cmd_train_adapt(args: argparse.Namespace) -> int:
    from lab.training.when_to_retrieve import train_adapt  # lazy: imports torch

    settings = replace(ADAPT_LORA, **stated(args, *LORA, "batch", "micro_batch"))
    try:
        chosen = _adapt_choices(args)
        settings.check()
    except ValueError as e:
        return error(e)
    options = ("limit", "datasets", "epochs", "lr", "rank", "alpha", "batch", "micro_batch", "seed", "out")
    command = command_line("train adapt", **stated(args, *options, "balance", "labels"), kinds=_stated(chosen["kinds"]))
    result = train_adapt(
        Path(args.out), args.limit, settings, cache_dir=_cache(args), command=command, say=say, **chosen
    )
    print(json.dumps({"wall_seconds": result["wall_seconds"], "data": result["data"]}, indent=1))
    return 0


def _stated(kinds: tuple[str, ...]) -> tuple[str, ...] | None:
    return kinds if kinds != ADAPTER_KINDS else None
