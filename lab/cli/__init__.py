"""The lab's command line, `python -m lab VERB NAME ...`: parser.py holds the five verbs and their names (parser_eval.py
the experiments'); one module per group runs them (experiments.py: the registry's experiments and when_to_retrieve;
pipeline_eval.py: pipeline; badges.py: badges; ret_signal.py: ret_signal; train.py: train reader and adapt; judge.py:
train judge, judge-gate and support; ops.py: the bench names and deploy-space; batch.py: batch).
"""

from __future__ import annotations

from lab.cli.parser import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
