"""The grammar of the verbs that join both papers: `pipeline` and `record-pipeline`.

Kept apart from parser.py (which calls add_pipeline_verbs) so that each grammar module stays short; the lab's
`experiment pipeline`, `experiment badges` and `experiment ret_signal` are lab/cli/parser_eval.py's.
"""

from __future__ import annotations

from raqa.cli.options import add_corpus_options, add_reader_option, command
from raqa.config import RunSettings
from raqa.when_to_retrieve.pipeline import DEFAULT_RET_THRESHOLD, PIPELINE_POLICIES


def add_pipeline_verbs(sub) -> None:
    one = sub.add_parser(
        "pipeline", help="both papers in one run: closed-book, decide, read windows, or 'I don't know'"
    )
    one.add_argument("question")
    one.add_argument("--policy", default="adapt", help=f"{' | '.join(PIPELINE_POLICIES)} (default adapt)")
    one.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_RET_THRESHOLD,
        help="adapt: retrieve when P(<RET>) >= this; a signal: retrieve when its confidence is below it",
    )
    one.add_argument("--order", default="forward", help="forward | backward")
    one.add_argument("--window", default=RunSettings.window, help="pages per window, 1-20")
    one.add_argument("--k", default=RunSettings.k, help="pages retrieved, 5-100")
    one.add_argument("--json", action="store_true", help="one JSON object per event")
    add_reader_option(one)
    add_corpus_options(one)
    one.set_defaults(func=command("pipeline:cmd_pipeline"))
    rec = sub.add_parser("record-pipeline", help="record real pipeline runs of the tab's examples for instant replay")
    rec.add_argument("questions", nargs="*", help="questions to record (default: the When-to-retrieve tab's examples)")
    rec.add_argument("--policy", default="adapt", help=f"{' | '.join(PIPELINE_POLICIES)} (default adapt)")
    rec.add_argument("--threshold", type=float, help="default: the tab's, from the committed pipeline evaluation")
    rec.add_argument("--out", default="assets/recordings/pipeline", help="folder of the recordings (JSONL)")
    add_reader_option(rec)
    add_corpus_options(rec)
    rec.set_defaults(func=command("pipeline:cmd_record_pipeline"))
