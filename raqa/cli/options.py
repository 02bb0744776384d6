"""The options several verbs share, and how a verb names its command: a leaf module of the command line's grammar.

parser.py, parser_eval.py and parser_pipeline.py build their verbs from these; the command modules read the loaded
configuration with `app_config`.
"""

from __future__ import annotations

import argparse
import importlib

from raqa.config import WEIGHTS, AppConfig, RunSettings
from raqa.when_to_retrieve.policies import POLICIES

DATASETS = ["nq", "triviaqa", "squad"]


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", help="JSONL or KILT corpus file (default: embedded Wikipedia; env RAQA_CORPUS)")
    parser.add_argument(
        "--model",
        help="HF model id, local folder or .gguf file for the small model's place (default: embedded SmolLM2; "
        "env RAQA_MODEL); with one given, the 1.5B reader is not offered",
    )
    parser.add_argument("--adapter", help="peft adapter folder (env RAQA_ADAPTER)")
    parser.add_argument("--cache", help="cache folder for the index and model (env RAQA_CACHE)")
    parser.add_argument("--weights", choices=WEIGHTS, help="decode weights: int4 (default) or fp32 (env RAQA_WEIGHTS)")


def add_corpus_options(parser: argparse.ArgumentParser) -> None:
    """--corpus and --cache only: for verbs whose model is fixed (the adapters were trained on the embedded one)."""
    parser.add_argument("--corpus", help="JSONL or KILT corpus file (default: embedded Wikipedia; env RAQA_CORPUS)")
    parser.add_argument("--cache", help="cache folder for the index and model (env RAQA_CACHE)")
    parser.set_defaults(model=None, adapter=None)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """How one question is read; validated by the service (config.validate_settings), not by argparse."""
    parser.add_argument("--strategy", default="iterative", help="iterative | topk")
    parser.add_argument("--order", default="forward", help="forward | backward")
    parser.add_argument("--window", default=RunSettings.window, help="pages per window, 1-20")
    parser.add_argument("--k", default=RunSettings.k, help="pages retrieved, 5-100")
    parser.add_argument("--grounded-only", action="store_true", help="count unsupported answers as declines")
    add_retrieval_option(parser)


def add_retrieval_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--retrieval",
        default=RunSettings.retrieval,
        help="hybrid (BM25's top 50 reranked by MiniLM, the default) | bm25 (BM25 alone)",
    )


def add_reader_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reader",
        help="qwen-1.5b (the 1.5B in llama.cpp, graded), base (the small model), base+judge, judge, a trained "
        "reader's folder name under assets/readers, or endpoint:NAME from RAQA_ENDPOINTS (default: env RAQA_READER, "
        "else qwen-1.5b when installed)",
    )


def app_config(args: argparse.Namespace) -> AppConfig:
    """What to load: the options given, else the RAQA_* variables; ValueError for a bad RAQA_POP_THRESHOLD."""
    weights = getattr(args, "weights", None)
    return AppConfig.from_env(
        corpus=args.corpus, model=args.model, adapter=args.adapter, cache_dir=args.cache, weights=weights
    )


def policy_list(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in POLICIES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"invalid policies {text!r}: choose from {', '.join(POLICIES)}")
    return names


def command(target: str, package: str = "raqa.cli"):
    """The command function "module:function" under package, imported when it is called."""
    module, name = target.split(":")

    def call(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"{package}.{module}"), name)(args)

    call.target = target  # type: ignore[attr-defined]
    return call


def add_server_options(parser: argparse.ArgumentParser, what: str, concurrency: int) -> None:
    parser.add_argument("--endpoint", help="a model server named in the RAQA_ENDPOINTS file (default: local model)")
    parser.add_argument("--concurrency", type=int, default=concurrency, help=f"{what} in flight at once (--endpoint)")
