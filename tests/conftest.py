"""Shared fixtures: a tiny eight-page corpus and its BM25 index, a cache folder, scripted backends,
the embedded corpus with its index (built once per session, about 3 s), and headless chromium for the browser tests.

Every tiny page states its own title in its first sentence, so "ANSWER: <title> / PAGE: <id> /
SENTENCE: 1" is a supported reply for any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from scripted import ScriptedBackend

from raqa.models.base import Messages
from raqa.retrieval.corpus import Page, load_corpus
from raqa.retrieval.index import BM25Index

TINY_PAGES = (
    Page(
        "p1",
        "Honey bee",
        "The honey bee is a flying insect that lives in large colonies. Worker bees collect nectar from flowers "
        "and turn it into honey. A colony is led by a single queen.",
    ),
    Page(
        "p2",
        "Mount Everest",
        "Mount Everest is the highest mountain above sea level. It stands on the border between Nepal and "
        "China. Tenzing Norgay and Edmund Hillary first reached the summit in 1953.",
    ),
    Page(
        "p3",
        "Mona Lisa",
        "The Mona Lisa is a portrait painted by Leonardo da Vinci. It hangs in the Louvre museum in Paris. "
        "The painting was stolen in 1911 and recovered two years later.",
    ),
    Page(
        "p4",
        "Photosynthesis",
        "Photosynthesis is the process plants use to turn light into chemical energy. It takes place in the "
        "chloroplasts of leaf cells. Oxygen is released as a by-product.",
    ),
    Page(
        "p5",
        "Danube",
        "The Danube is the second-longest river in Europe. It flows through ten countries, including Austria "
        "and Hungary. The river ends in the Black Sea.",
    ),
    Page(
        "p6",
        "Chess",
        "Chess is a board game for two players. Each player begins with sixteen pieces. The game ends when a "
        "king is checkmated.",
    ),
    Page(
        "p7",
        "Marie Curie",
        "Marie Curie was a physicist and chemist born in Warsaw. She discovered the elements polonium and "
        "radium. She was the first person to win two Nobel Prizes.",
    ),
    Page(
        "p8",
        "Great Wall of China",
        "The Great Wall of China is a series of fortifications in northern China. Most of the existing wall "
        "was built during the Ming dynasty. It is often said to be visible from space, which is a myth.",
    ),
)

# A question that shares a word with every tiny page, so all eight are retrieved.
BROAD_QUESTION = "bee everest mona photosynthesis danube chess curie wall"


@pytest.fixture(scope="session")
def tiny_pages() -> list[Page]:
    return list(TINY_PAGES)


@pytest.fixture(scope="session")
def tiny_index(tiny_pages: list[Page]) -> BM25Index:
    return BM25Index.build(tiny_pages)


@pytest.fixture
def broad_question() -> str:
    return BROAD_QUESTION


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """A cache folder that does not exist yet, as on a fresh machine."""
    return tmp_path / "cache"


@pytest.fixture
def scripted() -> Callable[..., ScriptedBackend]:
    """Build a ScriptedBackend from replies (or one function of the messages), optionally with a small context.

    Example:
        backend = scripted("NOT FOUND", "ANSWER: Paris\\nPAGE: p3\\nSENTENCE: 2", context_tokens=400)
    """

    def make(*replies: str | Callable[[Messages], str], context_tokens: int | None = None) -> ScriptedBackend:
        if len(replies) == 1 and callable(replies[0]):
            backend = ScriptedBackend(replies[0])
        else:
            backend = ScriptedBackend(list(replies))
        if context_tokens is not None:
            backend.context_tokens = context_tokens
        return backend

    return make


@pytest.fixture(scope="session")
def embedded_pages() -> list[Page]:
    return load_corpus()


@pytest.fixture(scope="session")
def embedded_index(embedded_pages: list[Page], tmp_path_factory: pytest.TempPathFactory) -> BM25Index:
    """The real index over the embedded corpus, built once and loaded back memory-mapped as the app does."""
    folder = tmp_path_factory.mktemp("embedded-index") / "index"
    BM25Index.build(embedded_pages).save(folder)
    return BM25Index.load(folder, embedded_pages)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium for the browser tests of one module (tests/browser.py says how it is launched)."""
    from browser import chromium

    with chromium() as launched:
        yield launched
