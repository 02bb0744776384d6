"""Open-domain QA questions with gold answers: the sets shipped in the pyserini 0.17.0 wheel, and user files.

The wheel's Anserini jar holds NQ-open, TriviaQA and SQuAD-open as text files; they are read with zipfile,
so neither Java nor pyserini's own imports (which pull heavy, missing dependencies) are needed. Two line
formats occur, and user files may use either:

    question<TAB>['answer', ...]                       NQ-open, TriviaQA
    {"question": "...", "answer": ["...", ...]}       SQuAD-open

Left out here: scoring answers (metrics) and which questions the corpus can answer at all (see DATA.md).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import random
import zipfile
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Literal, NamedTuple, get_args

Dataset = Literal["nq", "triviaqa", "squad"]
Split = Literal["test", "dev"]

PYSERINI_PACKAGE = "pyserini"
JAR = "resources/jars/anserini-0.14.3-fatjar.jar"
ENTRIES: dict[tuple[str, str], str] = {
    ("nq", "test"): "topics-and-qrels/topics.nq.test.txt",
    ("nq", "dev"): "topics-and-qrels/topics.nq.dev.txt",
    ("triviaqa", "test"): "topics-and-qrels/topics.dpr.trivia.test.txt",
    ("triviaqa", "dev"): "topics-and-qrels/topics.dpr.trivia.dev.txt",
    ("squad", "test"): "topics-and-qrels/topics.dpr.squad.test.txt",
}


ProgressBar = Callable[[Iterable], Iterable]  # wraps what a measurement iterates over (questions, windows) in a bar


class QAItem(NamedTuple):
    id: str  # "<dataset>-<split>-<line>" for the shipped sets, "<file stem>-<line>" for user files
    question: str
    answers: tuple[str, ...]  # every accepted gold answer


class QuestionsError(ValueError):
    """A question file or line cannot be read; the message names the file, the line and what was expected."""


def jar_path() -> Path:
    """The Anserini jar inside the installed pyserini wheel (pyserini itself is never imported)."""
    spec = importlib.util.find_spec(PYSERINI_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise QuestionsError(
            "The QA question sets come from the pyserini wheel, which is not installed: "
            "pip install --no-deps pyserini==0.17.0"
        )
    jar = Path(list(spec.submodule_search_locations)[0]) / JAR
    if not jar.is_file():
        raise QuestionsError(f"No Anserini jar at {jar}: the question sets need pyserini==0.17.0 exactly.")
    return jar


def _fix_cp1252(text: str) -> str:
    """subtle: a few TriviaQA questions hold cp1252 bytes read as latin-1 (U+0085 for an ellipsis, U+0091 for a
    quote); map those C1 control characters back to what they meant."""
    return "".join(bytes([ord(ch)]).decode("cp1252", "ignore") if 0x80 <= ord(ch) <= 0x9F else ch for ch in text)


def _is_csv_quoted(field: str) -> bool:
    """True for `"..."` whose inner quotes all come in doubled pairs, as CSV writes a field."""
    return len(field) >= 2 and field[0] == field[-1] == '"' and '"' not in field[1:-1].replace('""', "")


def csv_unquote(field: str) -> str:
    """Undo CSV quoting as many times as it was applied; any other text is returned as is.

    Example:
        >>> csv_unquote('"say ""hi"" now"')
        'say "hi" now'
    """
    while _is_csv_quoted(field):
        field = field[1:-1].replace('""', '"')
    return field


def _answer_list(text: str) -> tuple[str, ...] | None:
    """The strings of a Python list literal, or None if text is not one (a bare string literal is not)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
        return None
    return tuple(value)


def parse_tsv_line(line: str) -> tuple[str, tuple[str, ...]]:
    """Read `question<TAB>['answer', ...]`, where either field may be CSV-quoted, as in about 750 TriviaQA lines.

    Example:
        >>> parse_tsv_line('''"What is ""Son et Lumiere""?"\\t"['""Sound and light""', ""Lumiere's""]"''')
        ('What is "Son et Lumiere"?', ('Sound and light', "Lumiere's"))
    """
    question, tab, answers = line.rstrip("\r\n").partition("\t")
    if not tab:
        raise ValueError("expected a question, a tab, then a list of answers")
    parsed = _answer_list(answers)
    if parsed is None:
        # subtle: a CSV-quoted answer field is also a valid Python string literal, so it is unquoted only when it
        # is not a list; then its answers may be quoted once more, and an ordinary '"Heroes"' keeps its quotes
        parsed = _answer_list(csv_unquote(answers))
        if parsed is None:
            raise ValueError(f"expected a list of answers like ['a', 'b'], got {answers[:80]!r}")
        parsed = tuple(csv_unquote(a) for a in parsed)
    return _fix_cp1252(csv_unquote(question).strip()), tuple(_fix_cp1252(a.strip()) for a in parsed)


def parse_json_line(line: str) -> tuple[str, tuple[str, ...]]:
    """Read `{"question": "...", "answer": ["...", ...]}` (SQuAD-open); "answers" is accepted too."""
    record = json.loads(line)
    if not isinstance(record, dict) or not isinstance(record.get("question"), str):
        raise ValueError('expected a JSON object with a string field "question"')
    answers = record.get("answer", record.get("answers"))
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise ValueError('expected field "answer" to be a list of strings')
    # SQuAD lists the same span once per annotator; keep each answer once, in order
    return record["question"].strip(), tuple(dict.fromkeys(a.strip() for a in answers))


def parse_lines(lines: list[str], prefix: str, source: str) -> list[QAItem]:
    """QAItems of the non-empty lines, ids `<prefix>-<line number>`; each line may be TSV or JSON."""
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            parse = parse_json_line if line.lstrip().startswith("{") else parse_tsv_line
            question, answers = parse(line)
        except ValueError as e:  # json.JSONDecodeError is a ValueError
            raise QuestionsError(f"{source}, line {number}: {e}.") from None
        if not question:
            raise QuestionsError(f"{source}, line {number}: the question is empty.")
        items.append(QAItem(f"{prefix}-{number}", question, answers))
    return items


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"Invalid {name}: {value!r}. Choose from: {', '.join(choices)}.")


@lru_cache(maxsize=8)
def _shipped(dataset: str, split: str) -> tuple[QAItem, ...]:
    entry = ENTRIES[(dataset, split)]
    jar = jar_path()
    with zipfile.ZipFile(jar) as z:
        text = z.read(entry).decode("utf-8")
    # subtle: split on "\n" only; str.splitlines() would also break lines at U+0085 inside questions
    return tuple(parse_lines(text.split("\n"), f"{dataset}-{split}", f"{jar.name}:{entry}"))


def sample(items: list[QAItem], limit: int | None, seed: int | None) -> list[QAItem]:
    """The first `limit` items, or a seeded random sample of them (in file order) when seed is given."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be 0 or more, got {limit}.")
    if limit is None or limit >= len(items):
        return list(items)
    if seed is None:
        return list(items[:limit])
    chosen = sorted(random.Random(seed).sample(range(len(items)), limit))
    return [items[i] for i in chosen]


def load_questions(
    dataset: Dataset,
    split: Split = "test",
    limit: int | None = None,
    seed: int | None = None,
) -> list[QAItem]:
    """Questions and gold answers of NQ-open, TriviaQA or SQuAD-open (SQuAD has only a test split).

    Example:
        >>> load_questions("nq", limit=1)[0].question
        'who got the first nobel prize in physics'
    """
    _choice("dataset", dataset, get_args(Dataset))
    _choice("split", split, get_args(Split))
    if (dataset, split) not in ENTRIES:
        valid = ", ".join(f"{d}/{s}" for d, s in ENTRIES)
        raise ValueError(f"There is no {dataset} {split} split. Choose from: {valid}.")
    return sample(list(_shipped(dataset, split)), limit, seed)
