"""The example questions keep their promise: in-corpus ones retrieve a page stating the answer, outside ones do not."""

import json
from pathlib import Path

import pytest

from raqa.retrieval.corpus import load_embedded
from raqa.retrieval.index import load_or_build
from raqa.text import contains_answer
from raqa.web.examples import load_examples

EXAMPLES = json.loads((Path(__file__).parent.parent / "assets" / "examples.json").read_text())


@pytest.fixture(scope="module")
def embedded_pages():
    return load_embedded()


@pytest.fixture(scope="module")
def embedded_index(embedded_pages, tmp_path_factory):
    return load_or_build(embedded_pages, tmp_path_factory.mktemp("cache"))


@pytest.mark.parametrize("item", EXAMPLES["in_corpus"], ids=lambda i: i["question"])
def test_in_corpus_example_retrieves_a_page_with_its_answer(item, embedded_index):
    hits = embedded_index.search(item["question"], 15)
    assert any(contains_answer(h.page.text, item["answer"]) for h in hits)


@pytest.mark.parametrize("question", EXAMPLES["outside"])
def test_outside_example_has_no_page_naming_its_subject(question, embedded_pages):
    # the distinctive names of these questions occur in no page of the corpus
    subject = {"bakery": "baguette prize", "Lorient": "FC Lorient"}
    key = next(k for k in subject if k in question)
    assert not any(subject[key] in p.text for p in embedded_pages)


def test_load_examples_lists_every_question():
    assert len(load_examples()) == len(EXAMPLES["in_corpus"]) + len(EXAMPLES["outside"])
