"""Reading the judge's labels by hand: a drawn sample carries what the reader needs and an unset verdict, a read
file is counted per rule, and an unread or broken file is refused with its line."""

from __future__ import annotations

import json

import pytest

from raqa.cli import main
from raqa.evaluation.positives import PositiveIndex
from raqa.evaluation.questions import QAItem
from raqa.training import label_audit

MONA = QAItem("t-1", "Who painted the Mona Lisa that hangs in a museum?", ("Leonardo da Vinci",))
CHESS = QAItem("t-2", "Which chess piece moves in an L shape?", ("knight",))


def test_draw_takes_one_positive_a_question_with_an_unset_verdict(tiny_pages, tiny_index) -> None:
    rows = label_audit.draw([("tiny", CHESS), ("tiny", MONA)], tiny_index, PositiveIndex(tiny_pages), sample=5)
    assert len(rows) == 1  # the chess question has no answer-bearing page
    row = rows[0]
    assert (row["question_id"], row["span"], row["answers_question"]) == ("t-1", "Leonardo da Vinci", None)
    assert row["span"] in row["sentence"] and {"mona", "lisa"} <= set(row["shared"])


def _row(answers_question, shared) -> dict:
    return {"question": "q", "span": "a", "shared": shared, "answers_question": answers_question}


def test_summarise_counts_each_rule_on_the_reading() -> None:
    rows = [_row(True, ["a", "b", "c"]), _row(True, ["a"]), _row(False, ["a", "b"]), _row(False, [])]
    rules = label_audit.summarise(rows)["rules"]
    assert (rules["1"]["kept"], rules["1"]["right"]["value"]) == (4, 0.5)
    assert (rules["2"]["kept"], rules["2"]["right"]["value"], rules["2"]["right_positives_lost"]) == (2, 0.5, 1)
    assert (rules["3"]["kept"], rules["3"]["right"]["value"], rules["3"]["right_positives_lost"]) == (1, 1.0, 1)


def test_an_unread_line_is_refused_with_its_number(tmp_path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(_row(True, [])) + "\n" + json.dumps(_row(None, [])) + "\n")
    with pytest.raises(ValueError, match=r"labels.jsonl:2: set answers_question"):
        label_audit.read_rows(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match=r"labels.jsonl:1: not JSON"):
        label_audit.read_rows(path)


def test_the_command_summarises_read_files_into_a_card_and_never_draws_over_a_file(tmp_path, capsys) -> None:
    read = tmp_path / "dev.jsonl"
    read.write_text("".join(json.dumps(_row(v, ["a", "b"])) + "\n" for v in (True, True, False)))
    card = tmp_path / "card.json"
    assert main(["judge-labels", "--summarise", str(read), "--out", str(card)]) == 0
    written = json.loads(card.read_text())
    assert written["files"][str(read)]["rules"]["2"]["kept"] == 3
    assert written["command"].startswith("python -m raqa judge-labels --summarise ")
    assert main(["judge-labels", "--source", "dev", "--out", str(read)]) == 2  # exists: may hold a reading
    assert "exists" in capsys.readouterr().err
    assert main(["judge-labels", "--sample", "0", "--out", str(tmp_path / "new.jsonl")]) == 2
