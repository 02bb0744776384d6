"""Why torch ran slower from the batcher's worker thread than from the thread that first used it (issue 38, item 2).

The small model's decode is many small matrix products (one token times a 576 x 1536 weight). Each thread that runs
an OpenMP region gets its own libgomp thread pool, kept while the thread lives. Once the pools of two threads hold
more OpenMP threads than the machine has CPUs, libgomp spins only briefly before its workers sleep, so every small
product pays a futex wake-up: on 2 cores it runs at about single-thread speed. A thread that starts after the first
thread's pool is gone is fast again, and so is any thread when the main thread never made a pool.

This measures that, each case in a fresh process (a pool, once made, cannot be undone):
    main            the product from the main thread (its pool is the only one);
    worker_after    the same from a second thread while the main thread's pool exists (the batcher's case);
    worker_only     from a second thread when the main thread ran torch with one OpenMP thread (no pool of its own).

    python -m lab.ops.omp_threads --out assets/results/omp-threads.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from lab.records import command_line, write_json
from raqa.evaluation.records import provenance

OMP_CASES = ("main", "worker_after", "worker_only")

_PROBE = """
import json, sys, threading, time
import torch, torch.nn.functional as F
x, w = torch.randn(1, 576), torch.randn(1536, 576)
def product_us(n=5000):
    for _ in range(200): F.linear(x, w)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n): F.linear(x, w)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"us": wall / n * 1e6, "cores_busy": cpu / wall}
def in_thread(f):
    out = {}
    t = threading.Thread(target=lambda: out.update(f())); t.start(); t.join()
    return out
case = sys.argv[1]
if case == "main":
    result = product_us()
elif case == "worker_after":
    product_us(500)
    result = in_thread(product_us)
else:
    torch.set_num_threads(1)
    product_us(500)
    result = in_thread(lambda: (torch.set_num_threads(2), product_us())[1])
print(json.dumps(result | {"threads": torch.get_num_threads()}))
"""


def measure_omp_case(case: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE, case], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.ops.omp_threads", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    results = {case: measure_omp_case(case) for case in OMP_CASES}
    for case, r in results.items():
        print(f"{case}: {r['us']:.1f} us a product, {r['cores_busy']:.2f} cores busy")
    if args.out:
        command = command_line("lab.ops.omp_threads", out=args.out)
        write_json(args.out, {"measurement": "omp_threads", "command": command, **provenance(), "results": results})
        print(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
