"""The torch thread (raqa/models/torch_thread.py) off and on: the small model's runs and the 1.5B's decode after them.

Each case in a fresh process set up as the page is (`Service.load`, both readers):
    off   torch computes on whichever thread calls it, each thread with both cores: the page before the torch
          thread, where every thread that used torch kept an OpenMP pool;
    on    the page as it is: torch's arithmetic on its own thread, which ends when idle; the others compute with one
          OpenMP thread.
In each: one warm-up run of the small model, then `alone` runs one after another and `together` runs at once
(distinct NQ-open test questions, the page's defaults but K=5 pages), then, two seconds later, the 1.5B decodes 64
tokens of the same request three times (llama.cpp's own `predicted_per_second`, median). The 1.5B is the page's
default reader, so its decode after a visitor chose the small model is what the cause cost most visitors. Left out:
the two engines computing at the same moment (then they share two cores whatever the threads).

    python -m lab.ops.torch_pools --out assets/results/torch-pools.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from lab.records import command_line, write_json
from raqa.evaluation.records import provenance

POOL_CASES = ("off", "on")
ALONE, TOGETHER, K = 3, 8, 5


def torch_thread_off() -> None:
    """Undo the torch thread in this process (before raqa.loading is imported): calls run where they are made."""
    from raqa.models import torch_thread

    torch_thread.call_on_torch_thread = lambda fn, *args, **kwargs: fn(*args, **kwargs)
    torch_thread.one_pool = lambda: None


def workload() -> dict:
    from lab.ops.bench_speed import first_windows
    from lab.ops.reader_decode import READER_DECODE_TOKENS
    from raqa.config import AppConfig, RunForm
    from raqa.evaluation.questions import load_questions
    from raqa.reading.readers import BASE_READER, GRADED_READER
    from raqa.service import Service

    service = Service.load(AppConfig.from_env(), progress=lambda message: None)
    questions = [q.question for q in load_questions("nq", "test", limit=1 + ALONE + TOGETHER, seed=0)]
    form = RunForm(reader=BASE_READER.name, k=K)

    def run(question: str) -> float:
        began = time.perf_counter()
        for _ in service.events(service.plan(question, form)):
            pass
        return time.perf_counter() - began

    run(questions[0])
    alone = [run(q) for q in questions[1 : 1 + ALONE]]
    threads = [threading.Thread(target=run, args=(q,)) for q in questions[1 + ALONE :]]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    together = time.perf_counter() - began
    time.sleep(2.0)  # longer than the torch thread's idle time
    big = service.reader(GRADED_READER.name)[1]
    pages = first_windows(service.index, big, questions[:1])[0][-1]["content"]
    request = big._request(
        [{"role": "user", "content": pages + "\n\nRetell what these pages say."}], READER_DECODE_TOKENS, False
    )
    decode = [big.server.handle_chat_completions(request)["timings"]["predicted_per_second"] for _ in range(3)]
    return {
        "small_alone_s": alone,
        "small_alone_p50_s": statistics.median(alone),
        "small_together_wall_s": together,
        "big_decode_tok_s_runs": decode,
        "big_decode_tok_s": statistics.median(decode),
    }


def measure_pool_case(case: str) -> dict:
    child = [sys.executable, "-m", "lab.ops.torch_pools", "--case", case]
    done = subprocess.run(child, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.ops.torch_pools", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--case", choices=POOL_CASES, help=argparse.SUPPRESS)  # the child's side: one case, JSON out
    args = parser.parse_args(argv)
    if args.case:
        if args.case == "off":
            torch_thread_off()
        print(json.dumps(workload()))
        return 0
    results = {case: measure_pool_case(case) for case in POOL_CASES}
    for case, r in results.items():
        print(
            f"torch thread {case}: small model alone p50 {r['small_alone_p50_s']:.1f} s, {TOGETHER} at once "
            f"{r['small_together_wall_s']:.1f} s; then the 1.5B decodes {r['big_decode_tok_s']:.1f} tok/s"
        )
    if args.out:
        command = command_line("lab.ops.torch_pools", out=args.out)
        settings = {"alone": ALONE, "together": TOGETHER, "k": K, "questions": "nq test, seed 0"}
        write_json(
            args.out,
            {
                "measurement": "torch_pools",
                "command": command,
                **provenance(),
                "settings": settings,
                "results": results,
            },
        )
        print(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
