"""The demo's command line, `python -m raqa VERB ...`: parser.py holds its verbs and options; ask.py runs ask, route
and record, pipeline.py runs pipeline and record-pipeline; output.py prints. Training and measurement (batch too) are
the lab's (`python -m lab`, lab/cli).

`ask` streams the same events as the web page: as readable lines, or with --json as one JSON object per line
(the last of type "final" or "run_failed"). Exit status: 0 on a run, 2 on bad input.
"""

from __future__ import annotations

from raqa.cli.parser import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
