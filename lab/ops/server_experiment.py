"""One experiment read three ways on the same GGUF, in one run: by the local model, and by llama.cpp's
OpenAI-compatible server at concurrency 1 and at concurrency N (`python -m lab.ops.server_experiment`).

Each run is what `python -m lab experiment NAME --endpoint SERVER --concurrency N` does (registry.run_entry, the server
named in the record with its reported model id and sampling); here the server is started on loopback on the
embedded model's GGUF, so the comparison needs no endpoints file. Written into --out: the three records, and a
summary, server_experiment-NAME-DATASET.json, with each path's wall time, the ratio of concurrency N's wall time
to 1's, and for each row's metrics whether the server's value lies inside the local path's 95% interval.

llama-cpp-python's server generates one request at a time, so concurrency there buys only the overlap of the
client's work (prompt building, parsing, the judge where an experiment has one) with the server's generation, and
the queueing of each request's prompt behind the others'. A server with continuous batching (vLLM, TGI) serves N at
once: there the ratio is the one to watch. Left out: servers other than llama.cpp's (their records come from
`experiment --endpoint`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from lab.evaluation.registry import EXPERIMENTS, Options, on_server, question_pool, run_entry
from lab.ops.bench_timing import progress
from lab.ops.llama_server import ALIAS, llama_cpp_server
from lab.records import Run, command_line, write_json, write_record
from raqa.cli.output import say
from raqa.config import AppConfig
from raqa.evaluation import records
from raqa.loading import Lazy
from raqa.models.endpoint import EndpointBackend, EndpointConfig
from raqa.models.endpoints_file import READER_PREFIX
from raqa.models.local import embedded_model_path

SERVER_NAME = "SmolLM2 (llama.cpp server)"
COMPARED = (
    "false_answer_rate_on_negative",
    "exact_match_on_positive",
    "contains_gold_on_positive",
    "declined_on_positive",
    "mean_p_answer_negative",
    "mean_p_answer_positive",
)
SERVED = sorted(name for name, e in EXPERIMENTS.items() if e.needs_model and not e.local_only)


def _bar(label: str):
    return lambda items: progress(items, label)


def agreement(local: dict, served: dict) -> dict:
    """For each row (by its shots, window or label) and each compared metric: the local value with its interval,
    the server's value, and whether it lies inside; and how many of all do."""
    rows, inside, total = {}, 0, 0
    for mine, theirs in zip(local.get("rows", []), served.get("rows", []), strict=True):
        key = str(mine.get("shots", mine.get("label", mine.get("window"))))
        rows[key] = {}
        for metric in COMPARED:
            if not isinstance(mine.get(metric), dict) or not isinstance(theirs.get(metric), dict):
                continue  # not in this experiment's rows, or missing (a server without log-probabilities)
            low, high, value = mine[metric]["low"], mine[metric]["high"], theirs[metric]["value"]
            within = low - 1e-9 <= value <= high + 1e-9
            rows[key][metric] = {
                "local": mine[metric]["value"],
                "low": low,
                "high": high,
                "server": value,
                "within": within,
            }
            inside, total = inside + within, total + 1
    return {"rows": rows, "within": inside, "compared": total}


def same_results(a: dict, b: dict) -> bool:
    """Equal results, a score that is NaN in both (no answers to score) counting as equal."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def report(summary: dict, records_by_label: dict[str, dict], folder: str) -> str:
    """The docs' Markdown for one summary and its three records (docs/servers.md holds it; a test checks)."""
    n = summary["ratio_concurrency"]["concurrency"]
    lines = [
        f"`{summary['command']}` (the records: `{folder}/`), {summary['experiment']} on "
        f"{summary['dataset']}, --limit {summary['limit']}, the same GGUF three ways:",
        "",
        "| path | wall time | requests | prompt tokens | completion tokens | values inside the local intervals |",
        "|---|---|---|---|---|---|",
    ]
    for label, seconds in summary["seconds"].items():
        rows = records_by_label[label]["results"].get("rows", [])
        requests, prompt_tokens, completion_tokens = (
            sum(r.get(k, 0) for r in rows) for k in ("requests", "prompt_tokens", "completion_tokens")
        )
        agreed = summary["agreement"].get(label)
        inside = f"{agreed['within']} of {agreed['compared']}" if agreed else "(the reference)"
        lines.append(
            f"| {label} | {seconds:.0f} s | {requests} | {prompt_tokens:,} | {completion_tokens:,} | {inside} |"
        )
    lines += [
        "",
        f"Wall time at concurrency {n} over concurrency 1: **{summary['ratio_concurrency']['value']:.2f}**. "
        f"Same results at concurrency 1 and {n}: {'yes' if summary['identical_results_c1_cN'] else 'no'}.",
    ]
    served = records_by_label["server_c1"]["results"].get("rows", [])
    if served and all(r.get("requests") for r in served):
        lines += [
            "",
            "What one window costs through the server (its own usage reports), by the experiment's shots:",
            "",
            "| shots | prompt tokens a request | completion tokens a request |",
            "|---|---|---|",
        ]
        lines += [
            f"| {r['shots']} | {r['prompt_tokens'] / r['requests']:.0f} | {r['completion_tokens'] / r['requests']:.1f} |"
            for r in served
        ]
        windows = 2 * EXPERIMENTS[summary["experiment"]].limit  # answer-free and answer-bearing, per row
        prompt_tokens = sum(windows * r["prompt_tokens"] / r["requests"] for r in served)
        lines += [
            "",
            f"At the experiment's default size (--limit {windows // 2}: up to {windows} windows for each of "
            f"{len(served)} rows) that is at most {windows * len(served):,} requests and about "
            f"{prompt_tokens / 1e6:.2f} M prompt tokens, counted by this model's tokenizer.",
        ]
    return "\n".join(lines)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.ops.server_experiment", description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="negative_windows", choices=SERVED)
    parser.add_argument("--dataset", default="triviaqa")
    parser.add_argument(
        "--limit", type=int, default=10, help="the experiment's --limit (windows per kind for this one)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=4, help="compared with 1")
    parser.add_argument("--out", default="assets/results/server", help="folder for the records and the summary")
    args = parser.parse_args(list(argv) if argv is not None else None)
    from raqa.service import Service  # lazy: imports torch

    experiment, out = EXPERIMENTS[args.experiment], Path(args.out)
    service = Service.load(AppConfig.from_env(), progress=say)
    pool = question_pool(experiment, args.dataset, args.limit, args.seed)
    runs: dict[str, Run] = {}
    began = time.perf_counter()
    runs["local"] = run_entry(
        experiment,
        service,
        args.dataset,
        pool=pool,
        limit=args.limit,
        options=Options(seed=args.seed),
        progress=_bar(f"{args.experiment} local"),
    )
    context = service.backend.context_tokens  # the same page cuts as the local model's
    with llama_cpp_server(embedded_model_path(), context) as url:
        # generous timeouts: at concurrency N a request waits for the N - 1 before it on a one-at-a-time server
        # counting with the model's own tokenizer (one thread at a time: a fast tokenizer is not made to be shared),
        # the server reads the very pages the local model reads
        tokenizer = threading.Lock()

        def tokens(text: str) -> int:
            with tokenizer:
                return service.backend.count_tokens(text)

        server = EndpointBackend(
            EndpointConfig(SERVER_NAME, url, ALIAS, timeout_s=900, deadline_s=1800, context_tokens=context),
            tokens=tokens,
        )
        list(server.reply([{"role": "user", "content": "Hello"}], max_new_tokens=1))  # the server loads its model
        service.backends[READER_PREFIX + SERVER_NAME] = Lazy(value=server)
        served = on_server(experiment, service, SERVER_NAME)
        for n in (1, args.concurrency):
            options = Options(seed=args.seed, endpoint=SERVER_NAME, concurrency=n)
            runs[f"server_c{n}"] = run_entry(
                experiment,
                served,
                args.dataset,
                pool=pool,
                limit=args.limit,
                options=options,
                progress=_bar(f"{args.experiment} server, {n} at once"),
            )
    command = " ".join(
        [command_line("lab.ops.server_experiment"), *map(shlex.quote, sys.argv[1:] if argv is None else argv)]
    )
    for label, made in runs.items():
        made.about["made_by"] = command
        write_record(args.experiment, f"{args.dataset}-{label}", made.results, made.about, out)
    one, many = runs["server_c1"].seconds, runs[f"server_c{args.concurrency}"].seconds
    summary = {
        "command": command,
        "experiment": args.experiment,
        "dataset": args.dataset,
        "limit": args.limit,
        "server": runs["server_c1"].about["server"],
        "seconds": {label: round(made.seconds, 1) for label, made in runs.items()},
        "ratio_concurrency": {"concurrency": args.concurrency, "value": round(many / one, 3)},
        "agreement": {
            f"server_c{n}": agreement(runs["local"].results, runs[f"server_c{n}"].results)
            for n in (1, args.concurrency)
        },
        "identical_results_c1_cN": same_results(runs["server_c1"].results, runs[f"server_c{args.concurrency}"].results),
        **records.provenance(),
        "total_seconds": round(time.perf_counter() - began, 1),
    }
    path = write_json(out / f"server_experiment-{args.experiment}-{args.dataset}.json", summary)
    say(f"wrote {path}: concurrency {args.concurrency} / 1 wall time {summary['ratio_concurrency']['value']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
