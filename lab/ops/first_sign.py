"""A class arriving at once: how soon each visitor sees the first sign of their own run (their place in line, or
their first window), on the page's defaults and default reader (issue 38's target: within 2 s for 30 visitors).

The page is served in this process, with nothing else in it; the visitors are sessions of a child process
(reliability.drive_sessions_apart), each a distinct NQ-open test question, all submitted at the same moment. Each
run is stopped at its first sign, as the Stop button does, so a group of 30 takes seconds instead of the half hour
its whole runs take on 2 cores (`python -m lab bench load --readers` measures those); the page is given
QUIET_BETWEEN_GROUPS_S between groups for the stopped runs to leave the line.

    python -m lab.ops.first_sign --visitors 10,20,30 --seed 0 --out assets/results/first-sign.json
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from lab.ops.reliability import drive_sessions_apart, percentile, reliability_record, serve
from lab.records import command_line, write_json
from raqa.config import AppConfig
from raqa.evaluation.questions import load_questions

QUIET_BETWEEN_GROUPS_S = 15.0


def first_sign_group(url: str, questions: list[str]) -> dict:
    """One group's first signs: p50 and slowest, what the first sign was, and any session that failed."""
    results = drive_sessions_apart(url, questions, timeout=120.0, first_sign_only=True)
    signs = [r.first_progress_s for r in results if r.first_progress_s is not None]
    return {
        "visitors": len(questions),
        "first_sign_p50_s": round(percentile(signs, 50), 2) if signs else None,
        "first_sign_max_s": round(max(signs), 2) if signs else None,
        "within_2_s": sum(s <= 2.0 for s in signs),
        "first_signs": dict(Counter(r.events[0].get("type") for r in results if r.events)),
        "errors": [r.error for r in results if r.error],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.ops.first_sign", description=__doc__.split("\n")[0])
    parser.add_argument("--visitors", default="10,20,30", help="the group sizes, comma-separated, one after another")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the record here")
    args = parser.parse_args(argv)
    from raqa.service import Service  # lazy: loads the models

    sizes = [int(n) for n in args.visitors.split(",")]
    questions = [q.question for q in load_questions("nq", "test", limit=sum(sizes), seed=args.seed)]
    service = Service.load(AppConfig.from_env(), progress=print)
    demo, url = serve(service)
    groups, used = {}, 0
    try:
        for n in sizes:
            groups[f"visitors_{n}"] = first_sign_group(url, questions[used : used + n])
            used += n
            print(groups[f"visitors_{n}"], flush=True)
            time.sleep(QUIET_BETWEEN_GROUPS_S)
    finally:
        demo.close()
    if args.out:
        command = command_line("lab.ops.first_sign", visitors=args.visitors, seed=args.seed, out=args.out)
        reader = next(iter(service.readers), None)  # the page's default reader: the model the runs waited for
        model = service.reader()[1].name
        write_json(
            Path(args.out), reliability_record("first_sign", command, service, {"reader": reader, **groups}, model)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
