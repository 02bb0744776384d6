"""Prompt building and the reply parser, which must read many formats and never raise."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scripted import ScriptedBackend

from raqa.config import RunSettings
from raqa.reading.engine import run
from raqa.reading.events import Final, WindowVerdict
from raqa.reading.prompts import (
    _ANSWER_WRAPPER,
    _NOT_FOUND,
    DEMONSTRATIONS,
    SYSTEM_PROMPT,
    ParsedReply,
    build_messages,
    page_block,
    parse_reply,
)
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import Hit
from raqa.text import split_sentences


def count_words(text: str) -> int:
    return len(text.split())


def hit(page: Page, rank: int = 1) -> Hit:
    return Hit(rank, 1.0 / rank, page)


def fields_of(reply: ParsedReply) -> tuple:
    return (reply.kind, reply.answer, reply.page_id, reply.sentence, reply.quote, reply.reason)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            "ANSWER: Leonardo da Vinci\nPAGE: 5071\nSENTENCE: 1",
            ("answer", "Leonardo da Vinci", "5071", 1, None, None),
            id="valid-answer",
        ),
        pytest.param(
            "ANSWER: Paris\nPAGE: 12\nSENTENCE: 2\nRATIONALE: It says so.",
            ("answer", "Paris", "12", 2, None, "It says so."),
            id="answer-with-rationale",
        ),
        pytest.param(
            "answer: paris\npage: 12\nsentence: 2",
            ("answer", "paris", "12", 2, None, None),
            id="lower-case-fields",
        ),
        pytest.param(
            "Answer: 1889\nPage: 901 (Eiffel Tower)\nSentence: 2.",
            ("answer", "1889", "901", 2, None, None),
            id="title-case-fields",
        ),
        pytest.param(
            "**ANSWER:** Paris\n**SENTENCE:** 2",
            ("answer", "Paris", None, 2, None, None),
            id="markdown-bold-fields-missing-page",
        ),
        pytest.param(
            "ANSWER: **Paris**\nPAGE: [12]\nSENTENCE: [2]",
            ("answer", "Paris", "12", 2, None, None),
            id="markdown-bold-answer",
        ),
        pytest.param("ANSWER: Paris", ("answer", "Paris", None, None, None, None), id="missing-page"),
        pytest.param(
            'ANSWER: "Paris"\nPAGE: Page 12\nQUOTE: "Paris is the capital of France."',
            ("answer", "Paris", "12", None, "Paris is the capital of France.", None),
            id="quote-field",
        ),
        pytest.param(
            "ANSWER: Paris\nPAGE ID: 12\nPASSAGE: “Paris is big”",
            ("answer", "Paris", "12", None, "Paris is big", None),
            id="page-id-and-passage",
        ),
        pytest.param(
            "ANSWER - Paris\nPAGE - #12\nSENTENCE - 3",
            ("answer", "Paris", "12", 3, None, None),
            id="dashes",
        ),
        pytest.param(
            "ANSWER: The answer is: [1] Gustave Eiffel\nPAGE: 901\nSENTENCE: 2",
            ("answer", "Gustave Eiffel", "901", 2, None, None),
            id="the-answer-is-wrapper",
        ),
        pytest.param("ANSWER: [3] Paris.", ("answer", "Paris", None, None, None, None), id="number-wrapper"),
        pytest.param(
            "ANSWER: Paris\nPAGE: 12\nSENTENCE: two",
            ("answer", "Paris", "12", None, None, None),
            id="sentence-in-words",
        ),
        pytest.param(
            "ANSWER: Paris\nPAGE: 12\nSENTENCE: 1234567",
            ("answer", "Paris", "12", None, None, None),
            id="absurd-sentence-number",
        ),
        pytest.param(
            "ANSWER: Paris\nPAGE: 12\nANSWER: London\nPAGE: 13",
            ("answer", "Paris", "12", None, None, None),
            id="first-field-wins",
        ),
        pytest.param(
            "Let me look.\nANSWER: Paris\nPAGE: 12",
            ("answer", "Paris", "12", None, None, None),
            id="preamble-line",
        ),
        pytest.param(
            "NOT FOUND\nREASON: The pages are about rivers.",
            ("not_found", None, None, None, None, "The pages are about rivers."),
            id="not-found-with-reason",
        ),
        pytest.param("NOT FOUND", ("not_found", None, None, None, None, None), id="not-found"),
        pytest.param("not found.", ("not_found", None, None, None, None, None), id="not-found-lower"),
        pytest.param("  \n NOT  FOUND\n", ("not_found", None, None, None, None, None), id="not-found-padded"),
        pytest.param("No answer in these pages.", ("not_found", None, None, None, None, None), id="no-answer"),
        pytest.param(
            "NOT FOUND\nRATIONALE: nothing relevant",
            ("not_found", None, None, None, None, "nothing relevant"),
            id="not-found-rationale",
        ),
        pytest.param("ANSWER: NOT FOUND", ("not_found", None, None, None, None, None), id="answer-not-found"),
        pytest.param("ANSWER: Not found.", ("not_found", None, None, None, None, None), id="answer-field-not-found"),
        pytest.param("The answer is: [1] X", ("unparseable", None, None, None, None, None), id="no-answer-field"),
        pytest.param("I think maybe", ("unparseable", None, None, None, None, None), id="garbage"),
        pytest.param("ANSWER:\nPAGE: 3", ("unparseable", None, None, None, None, None), id="empty-answer"),
        pytest.param(
            "ANSWER: **\nREASON: unsure",
            ("unparseable", None, None, None, None, "unsure"),
            id="answer-only-markup",
        ),
        pytest.param("", ("unparseable", None, None, None, None, None), id="empty"),
        pytest.param(" \n\t ", ("unparseable", None, None, None, None, None), id="white-space"),
    ],
)
def test_parse_reply(raw: str, expected: tuple) -> None:
    reply = parse_reply(raw)
    assert fields_of(reply) == expected
    assert reply.raw == raw


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            "**ANSWER:** Paris\n**PAGE:** 12\n**SENTENCE:** 2",
            id="bold-page-label",
        ),
        pytest.param(
            "ANSWER: Paris\nPAGE: 12.\nSENTENCE: 2.",
            id="page-with-full-stop",
        ),
    ],
)
def test_page_id_survives_decoration(raw: str) -> None:
    assert parse_reply(raw).page_id == "12"


@pytest.mark.parametrize("raw", [None, 42, 3.5, b"ANSWER: Paris", ["ANSWER: Paris"], {"ANSWER": "Paris"}])
def test_non_string_replies_are_unparseable(raw: object) -> None:
    assert parse_reply(raw) == ParsedReply("unparseable", "")


def test_docstring_examples() -> None:
    assert parse_reply("ANSWER: Paris\nPAGE: 12\nSENTENCE: 2").page_id == "12"
    assert parse_reply("I think maybe").kind == "unparseable"


def test_demonstrations_follow_the_format() -> None:
    (_, answer), (_, decline) = DEMONSTRATIONS[:2]
    assert fields_of(parse_reply(answer)) == ("answer", "Gustave Eiffel", "901", 2, None, None)
    assert fields_of(parse_reply(decline)) == (
        "not_found",
        None,
        None,
        None,
        None,
        "The pages are about rivers, not about swimming the Channel.",
    )


FRAGMENTS = [
    "ANSWER:",
    "answer:",
    "**ANSWER:**",
    "ANSWER -",
    "NOT FOUND",
    "not found",
    "NO ANSWER",
    "PAGE:",
    "PAGE ID:",
    "page 12",
    "SENTENCE:",
    "QUOTE:",
    "PASSAGE:",
    "REASON:",
    "RATIONALE:",
    "The answer is:",
    "[1]",
    "[",
    "]",
    "#",
    "(",
    ")",
    "*",
    '"',
    "“",
    " ",
    "\n",
    "\r\n",
    "\x85",
    "\u2028",
    "\x00",
    "12",
    "٣",
    "999999999",
    "Paris",
    ".",
    ":",
    "-",
]

replies = st.one_of(
    st.text(max_size=80),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=12).map("".join),
)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replies)
def test_parse_reply_never_raises(raw: str) -> None:
    reply = parse_reply(raw)
    assert reply.kind in ("answer", "not_found", "unparseable")
    assert reply.raw == raw
    if reply.kind == "answer":
        assert reply.answer and reply.answer == reply.answer.strip()
        assert reply.sentence is None or isinstance(reply.sentence, int)
        assert reply.page_id is None or reply.page_id.strip() == reply.page_id != ""
    else:
        assert (reply.answer, reply.page_id, reply.sentence, reply.quote) == (None, None, None, None)


@given(st.one_of(st.none(), st.integers(), st.floats(), st.binary(), st.lists(st.text(max_size=5))))
def test_parse_reply_reads_non_strings_as_unparseable(raw: object) -> None:
    assert parse_reply(raw).kind == "unparseable"


PAGE = Page(
    "42",
    "Mona Lisa",
    "The Mona Lisa is a portrait by Leonardo da Vinci. It hangs in the Louvre. It was stolen in 1911.",
)


def test_page_block_numbers_every_sentence_when_it_fits() -> None:
    block, cut = page_block(hit(PAGE), 1000, count_words)
    assert block == (
        "Page 42: Mona Lisa\n"
        "[1] The Mona Lisa is a portrait by Leonardo da Vinci.\n"
        "[2] It hangs in the Louvre.\n"
        "[3] It was stolen in 1911."
    )
    assert cut is False


def block_cost(lines: list[str]) -> int:
    """What page_block charges: the header, then each sentence line plus one for its line break."""
    return count_words(lines[0]) + sum(count_words(line) + 1 for line in lines[1:])


@pytest.mark.parametrize("budget", range(0, 40))
def test_page_block_cuts_at_a_sentence_boundary(budget: int) -> None:
    full, _ = page_block(hit(PAGE), 10_000, count_words)
    full_lines = full.split("\n")
    block, cut = page_block(hit(PAGE), budget, count_words)
    lines = block.split("\n")
    assert lines == full_lines[: len(lines)]  # whole sentences only, in order
    assert len(lines) >= 2  # the first sentence is always kept, however small the budget
    assert cut is (len(lines) < len(full_lines))
    if len(lines) > 2:
        assert block_cost(lines) <= budget
    if cut:
        assert block_cost(full_lines[: len(lines) + 1]) > budget


def test_page_block_example_cut() -> None:
    block, cut = page_block(hit(PAGE), 23, count_words)
    assert (
        block
        == "Page 42: Mona Lisa\n[1] The Mona Lisa is a portrait by Leonardo da Vinci.\n[2] It hangs in the Louvre."
    )
    assert cut is True


def test_build_messages_order(tiny_pages: list[Page]) -> None:
    hits = [hit(page, rank) for rank, page in enumerate(tiny_pages[:3], start=1)]
    messages = build_messages("Who painted the Mona Lisa?", hits, 320, count_words)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    assert [(m["content"]) for m in messages[1:5]] == [text for pair in DEMONSTRATIONS[:2] for text in pair]
    last = messages[-1]["content"]
    assert last.endswith("\n\nQuestion: Who painted the Mona Lisa?")
    blocks = last.split("\n\n")[:-1]
    assert [block.split("\n")[0] for block in blocks] == [
        "Page p1: Honey bee",
        "Page p2: Mount Everest",
        "Page p3: Mona Lisa",
    ]
    for block, page in zip(blocks, tiny_pages[:3], strict=True):
        numbered = [re.sub(r"^\[\d+\] ", "", line) for line in block.split("\n")[1:]]
        assert numbered == split_sentences(page.text)
        assert [line.split("]")[0] for line in block.split("\n")[1:]] == ["[1", "[2", "[3"]


@pytest.mark.parametrize("shots", [0, 1, 2])
def test_build_messages_with_fewer_shots(tiny_pages: list[Page], shots: int) -> None:
    messages = build_messages("Q?", [hit(tiny_pages[0])], 320, count_words, DEMONSTRATIONS[:shots])
    assert len(messages) == 2 + 2 * shots
    assert messages[-1]["content"].startswith("Page p1: Honey bee\n[1] ")


def test_build_messages_cuts_long_pages(tiny_pages: list[Page]) -> None:
    messages = build_messages("Q?", [hit(page) for page in tiny_pages[:2]], 5, count_words, ())
    first, second, question = messages[-1]["content"].split("\n\n")
    assert first.count("\n") == 1 and second.count("\n") == 1  # header and first sentence only
    assert question == "Question: Q?"


def _demo_pages(user: str) -> list:
    from raqa.retrieval.corpus import Page
    from raqa.retrieval.index import Hit

    hits = []
    for block in user.split("\n\nQuestion:")[0].split("\n\n"):
        header, *lines = block.split("\n")
        page_id, title = header.removeprefix("Page ").split(": ", 1)
        text = " ".join(line.split("] ", 1)[1] for line in lines)
        hits.append(Hit(len(hits) + 1, 1.0, Page(page_id, title, text)))
    return hits


def test_demonstrations_alternate_answer_and_decline_and_their_answers_are_grounded() -> None:
    from raqa.reading.grounding import check
    from raqa.reading.prompts import DEMONSTRATIONS

    assert len(DEMONSTRATIONS) == 8
    kinds = [parse_reply(reply).kind for _, reply in DEMONSTRATIONS]
    assert kinds == ["answer", "not_found"] * 4
    for user, reply in DEMONSTRATIONS[::2]:
        question = user.split("Question: ")[1]
        assert check(parse_reply(reply), _demo_pages(user), question).supported, question


WELL_FORMED = [
    "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1\n",
    "ANSWER: Paris\nPAGE: p3\nQUOTE: It hangs in the Louvre museum in Paris.\n",
    "NOT FOUND\nREASON: None of these pages says when the wall was painted.\n",
    "ANSWER: 1953\nPAGE: p2\nSENTENCE: 3\nREASON: The page says so.\n",
]


@st.composite
def truncated_or_mixed(draw) -> str:
    """A well-formed reply cut anywhere, spliced with another, or with a fragment dropped in."""
    first = draw(st.sampled_from(WELL_FORMED))
    cut = draw(st.integers(0, len(first)))
    text = first[:cut]
    if draw(st.booleans()):
        second = draw(st.sampled_from(WELL_FORMED))
        text += second[draw(st.integers(0, len(second))) :]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6))) + text[at:]
    return text


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(truncated_or_mixed())
@example("ANSWER: NO ANSWER")
@example('ANSWER: "The answer is: Paris')
def test_truncated_and_mixed_replies_parse_to_a_defined_kind(raw: str) -> None:
    reply = parse_reply(raw)
    assert reply.kind in ("answer", "not_found", "unparseable")
    first_line = raw[len("ANSWER: ") :].splitlines()[0] if raw[len("ANSWER: ") :].strip() else ""
    # subtle: "The answer is:" alone is a wrapper the parser strips, leaving no answer (found by hypothesis)
    first_line = _ANSWER_WRAPPER.sub("", first_line.strip().strip("\"'*").strip())
    # an answer field that itself says "NO ANSWER" or "NOT FOUND" is an abstention (found by hypothesis)
    abstains = _NOT_FOUND.match(raw) or _NOT_FOUND.match(first_line)
    if raw.startswith("ANSWER: ") and any(ch.isalnum() for ch in first_line) and not abstains:
        assert reply.kind == "answer"  # a reply cut after its answer still counts as an answer


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(truncated_or_mixed(), replies))
def test_any_reply_ends_its_window_in_a_defined_verdict(tiny_index, raw: str) -> None:
    """Through the whole path: parser, grounding check and engine, with the window holding every page."""
    question = "bee everest mona photosynthesis danube chess curie wall"  # retrieves all eight tiny pages
    events = list(run(question, tiny_index, ScriptedBackend([raw]), RunSettings(window=8, k=8)))
    verdicts = [e for e in events if isinstance(e, WindowVerdict)]
    assert len(verdicts) == 1
    assert verdicts[0].verdict in ("answered", "unsupported", "not_found", "unparseable")
    assert isinstance(events[-1], Final)
