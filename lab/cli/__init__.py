"""The lab's command line, `python -m lab VERB NAME ...`: parser.py holds the five verbs and their names (parser_eval.py
the experiments'); one module per group runs them (experiments.py: the registry's experiments and when_to_retrieve;
pipeline_eval.py: pipeline; badges.py: badges; ret_signal.py: ret_signal; train.py: train reader and adapt; judge.py:
train judge, judge-gate and support; ops.py: the bench names and deploy-space; batch.py: batch).
"""

from __future__ import annotations

from lab.cli.parser import build_parser
from lab.evaluation.rows_file import RowsFileError
from raqa.cli.output import error


def main(argv: list[str] | None = None) -> int:
    """Run the verb; a rows file that cannot be resumed or written (another run holds it, a line before the last is
    unreadable) is said in one line, exit status 2, for every verb that keeps one."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RowsFileError as e:
        return error(e)
