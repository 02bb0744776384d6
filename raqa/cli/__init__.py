"""The command line, `python -m raqa VERB ...`: parser.py holds every verb and option; one module per group
of verbs runs them (ask.py: ask, route, batch; experiments.py: experiment, eval-adapt; train.py: train-reader,
train-adapt; ops.py: bench, load-test, soak, scale-bench, time-start, deploy-space); output.py prints.

`ask` streams the same events as the web page: as readable lines, or with --json as one JSON object per line
(the last of type "final" or "run_failed"). Exit status: 0 on a run, 2 on bad input.
"""

from __future__ import annotations

from raqa.cli.parser import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
