"""The lab's command line, `python -m lab VERB ...`: parser.py holds the verbs (parser_eval.py the evaluation verbs'
grammar); one module per group runs them (experiments.py: experiment, eval-adapt; pipeline_eval.py: eval-pipeline;
badges.py: eval-badges; ret_signal.py: compare-ret; train.py: train-reader, train-adapt; judge.py: train-judge,
calibrate-judge, fit-support; ops.py: bench, load-test, soak, scale-bench, time-start, deploy-space).
"""

from __future__ import annotations

from lab.cli.parser import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
