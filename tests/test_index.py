"""BM25 index: ranking, k, save/load, the cache of load_or_build, and the real embedded index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index, Hit, index_folder, load_or_build


def ranking(hits: list[Hit]) -> list[tuple[int, str, float]]:
    return [(hit.rank, hit.page.id, round(hit.score, 5)) for hit in hits]


QUESTIONS = [
    ("Who painted the Mona Lisa?", "Mona Lisa"),
    ("Which river flows into the Black Sea?", "Danube"),
    ("Who discovered polonium and radium?", "Marie Curie"),
    ("How many pieces does each chess player begin with?", "Chess"),
    ("What do worker bees make from nectar?", "Honey bee"),
    ("When was the summit of the highest mountain first reached?", "Mount Everest"),
    ("Which dynasty built most of the wall?", "Great Wall of China"),
    ("Where does photosynthesis take place?", "Photosynthesis"),
]


@pytest.mark.parametrize(("question", "title"), QUESTIONS)
def test_the_relevant_page_ranks_first(tiny_index: BM25Index, question: str, title: str) -> None:
    hits = tiny_index.search(question, 5)
    assert hits[0].page.title == title
    if len(hits) > 1:
        assert hits[0].score > 2 * hits[1].score


def test_hits_are_ranked_best_first(tiny_index: BM25Index, broad_question: str) -> None:
    hits = tiny_index.search(broad_question, 8)
    assert [hit.rank for hit in hits] == list(range(1, 9))
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(score > 0 for score in scores)
    assert sorted(hit.page.id for hit in hits) == [f"p{n}" for n in range(1, 9)]


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_k_is_respected(tiny_index: BM25Index, broad_question: str, k: int) -> None:
    hits = tiny_index.search(broad_question, k)
    assert len(hits) == k
    assert ranking(hits) == ranking(tiny_index.search(broad_question, 8)[:k])


def test_k_above_the_corpus_size_returns_every_matching_page(tiny_index: BM25Index, broad_question: str) -> None:
    assert len(tiny_index.search(broad_question, 100)) == 8


def test_pages_with_a_zero_score_are_left_out(tiny_index: BM25Index) -> None:
    hits = tiny_index.search("How many pieces does each chess player begin with?", 8)
    assert [hit.page.title for hit in hits] == ["Chess"]


@pytest.mark.parametrize("question", ["", "?!", "...", "量子力学", "Zxqv vvkrt jjj"])
def test_no_shared_word_returns_nothing(tiny_index: BM25Index, question: str) -> None:
    assert tiny_index.search(question, 5) == []


def test_ties_rank_the_same_on_every_call(tiny_pages: list[Page]) -> None:
    twins = [Page(f"t{n}", "Twin", "The same text about bees.") for n in range(6)]
    index = BM25Index.build(twins + list(tiny_pages))
    hits = index.search("bees", 10)
    twin_ids = [hit.page.id for hit in hits if hit.page.title == "Twin"]
    assert twin_ids == [f"t{n}" for n in range(6)]  # equal scores: page order decides
    assert ranking(index.search("bees", 10)) == ranking(hits)


def test_progress_reports_up_to_one(tiny_pages: list[Page]) -> None:
    reports: list[tuple[str, float]] = []
    BM25Index.build(tiny_pages, progress=lambda message, fraction: reports.append((message, fraction)))
    fractions = [fraction for _, fraction in reports]
    assert fractions == sorted(fractions)
    assert reports[-1] == ("Index ready", 1.0)


def test_word_tokenizer_ranks_too(tiny_pages: list[Page]) -> None:
    index = BM25Index.build(tiny_pages, tokenizer="word")
    assert index.search("Who painted the Mona Lisa?", 3)[0].page.id == "p3"


def test_unknown_tokenizer_lists_the_choices(tiny_pages: list[Page]) -> None:
    with pytest.raises(ValueError, match="Invalid tokenizer: bpe. Choose from: wordpiece, word."):
        BM25Index.build(tiny_pages, tokenizer="bpe")  # type: ignore[arg-type]


def test_save_and_load_give_the_same_results(tiny_index: BM25Index, tiny_pages: list[Page], tmp_path: Path) -> None:
    folder = tmp_path / "saved"
    tiny_index.save(folder)
    loaded = BM25Index.load(folder, tiny_pages)
    for question, _ in QUESTIONS:
        assert ranking(loaded.search(question, 5)) == ranking(tiny_index.search(question, 5))
    assert os.listdir(tmp_path) == ["saved"]  # the temporary folder was renamed away


def test_save_replaces_an_existing_index(tiny_pages: list[Page], tmp_path: Path) -> None:
    folder = tmp_path / "saved"
    BM25Index.build(tiny_pages[:2]).save(folder)
    BM25Index.build(tiny_pages).save(folder)
    assert BM25Index.load(folder, tiny_pages).search("Danube", 3)[0].page.id == "p5"
    assert os.listdir(tmp_path) == ["saved"]


def test_load_refuses_another_corpus_or_tokenizer(tiny_index: BM25Index, tiny_pages: list[Page], tmp_path: Path):
    folder = tmp_path / "saved"
    tiny_index.save(folder)
    with pytest.raises(ValueError, match="another corpus or tokenizer"):
        BM25Index.load(folder, tiny_pages[:7])
    with pytest.raises(ValueError, match="another corpus or tokenizer"):
        BM25Index.load(folder, tiny_pages, tokenizer="word")


def test_load_or_build_caches_and_loads_on_the_second_call(
    tiny_pages: list[Page], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = load_or_build(tiny_pages, cache_dir)
    folder = index_folder(cache_dir, tiny_pages, "wordpiece")
    assert (folder / "raqa.json").is_file()

    def no_build(*args, **kwargs):
        raise AssertionError("the cached index should have been loaded")

    monkeypatch.setattr(BM25Index, "build", classmethod(no_build))
    second = load_or_build(tiny_pages, cache_dir)
    for question, _ in QUESTIONS:
        assert ranking(second.search(question, 5)) == ranking(first.search(question, 5))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:10])


def _shorten(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-8])


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x93NUMPY garbage " * 20)


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("data.csc.index.npy", _truncate),
        ("data.csc.index.npy", _shorten),
        ("indices.csc.index.npy", _garbage),
        ("indptr.csc.index.npy", Path.unlink),
        ("vocab.index.json", lambda path: path.write_text("{not json")),
        ("raqa.json", Path.unlink),
    ],
)
def test_a_corrupt_cache_is_rebuilt(tiny_pages: list[Page], cache_dir: Path, name: str, damage) -> None:
    expected = ranking(load_or_build(tiny_pages, cache_dir).search("Who painted the Mona Lisa?", 5))
    folder = index_folder(cache_dir, tiny_pages, "wordpiece")
    damage(folder / name)
    messages: list[str] = []
    rebuilt = load_or_build(tiny_pages, cache_dir, progress=lambda message, fraction: messages.append(message))
    assert messages[0].startswith("Rebuilding the index: the cached one could not be read")
    assert ranking(rebuilt.search("Who painted the Mona Lisa?", 5)) == expected
    # the cache was repaired: it loads again without a rebuild
    assert ranking(BM25Index.load(folder, tiny_pages).search("Who painted the Mona Lisa?", 5)) == expected


def test_a_changed_corpus_gets_its_own_index(
    tiny_pages: list[Page], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_or_build(tiny_pages, cache_dir)
    changed = list(tiny_pages)
    changed[2] = changed[2]._replace(text="The Mona Lisa is a portrait by Leonardo da Vinci of Lisa Gherardini.")
    builds: list[int] = []
    real_build = BM25Index.build.__func__

    def counting_build(cls, pages, *args, **kwargs):
        builds.append(len(pages))
        return real_build(cls, pages, *args, **kwargs)

    monkeypatch.setattr(BM25Index, "build", classmethod(counting_build))
    index = load_or_build(changed, cache_dir)
    assert builds == [8]
    assert index_folder(cache_dir, changed, "wordpiece") != index_folder(cache_dir, tiny_pages, "wordpiece")
    assert len(os.listdir(cache_dir / "index")) == 2
    assert index.search("Gherardini", 3)[0].page.id == "p3"
    load_or_build(changed, cache_dir)
    assert builds == [8]


def test_an_unwritable_cache_still_gives_an_index(tiny_pages: list[Page], tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    messages: list[str] = []
    index = load_or_build(tiny_pages, blocker, progress=lambda message, fraction: messages.append(message))
    assert index.search("Who painted the Mona Lisa?", 3)[0].page.id == "p3"
    assert any(message.startswith("The index works but could not be cached") for message in messages)


def test_embedded_index_finds_the_mona_lisa(embedded_index: BM25Index) -> None:
    hits = embedded_index.search("Who painted the Mona Lisa?", 15)
    assert hits[0].page.title == "Mona Lisa"
    assert len(hits) == 15
    assert [hit.rank for hit in hits] == list(range(1, 16))
