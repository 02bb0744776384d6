"""The answer judge's labels on the tiny corpus: a clean positive with its span, an ambiguous page skipped,
hard negatives, per-question balance, and seeded reruns that give the same pairs."""

from __future__ import annotations

import random

from lab.evaluation.positives import PositiveIndex
from lab.training.judge_data import build_pairs, label_page, question_pairs
from raqa.evaluation.questions import QAItem
from raqa.retrieval.corpus import Page

MONA = QAItem(
    "t-1", "Who painted the Mona Lisa that hangs in a museum, and is it older than chess?", ("Leonardo da Vinci",)
)


def page(pages, page_id: str) -> Page:
    return next(p for p in pages if p.id == page_id)


def test_a_sentence_about_the_question_that_states_the_answer_makes_a_positive_with_its_span(tiny_pages) -> None:
    mona = page(tiny_pages, "p3")
    label, start, answer = label_page(MONA.question, MONA.answers, mona, PositiveIndex(tiny_pages))
    assert (label, answer) == ("positive", "Leonardo da Vinci")
    assert mona.text[start : start + len(answer)] == "Leonardo da Vinci"


def test_the_span_is_the_page_s_own_text_even_with_odd_spacing_and_case() -> None:
    odd = Page("x", "Mona Lisa", "Mona Lisa was painted by LEONARDO \tda Vinci, they say.")
    label, start, answer = label_page("Who painted the Mona Lisa?", ["leonardo da vinci"], odd, PositiveIndex([odd]))
    assert (label, answer) == ("positive", "LEONARDO \tda Vinci")
    assert odd.text[start : start + len(answer)] == answer


def test_an_answer_only_in_a_sentence_unrelated_to_the_question_is_skipped_as_ambiguous(tiny_pages) -> None:
    # "1953" is on the Everest page, but in a sentence sharing no content word with the question
    everest = page(tiny_pages, "p2")
    label, start, answer = label_page("When did the Titanic sink?", ["1953"], everest, PositiveIndex(tiny_pages))
    assert (label, start, answer) == ("ambiguous", None, None)


def test_a_retrieved_page_without_the_answer_is_a_hard_negative(tiny_pages, tiny_index) -> None:
    hits = tiny_index.search(MONA.question, 15)
    chess = next(h for h in hits if h.page.id == "p6")  # retrieved for "chess", no answer
    assert label_page(MONA.question, MONA.answers, chess.page, PositiveIndex(tiny_pages)) == ("negative", None, None)
    pairs, counts = question_pairs(MONA, "tiny", hits, PositiveIndex(tiny_pages), random.Random(0), per_question=2)
    assert [p.positive for p in pairs] == [True, False]  # one positive page, so one negative to balance it
    assert pairs[0].page.id == "p3" and pairs[0].answer == "Leonardo da Vinci"
    assert pairs[1].page.id != "p3" and pairs[1].start is None and pairs[1].rank >= 1
    assert counts["positive"] == 1 and counts["negative"] == len(hits) - 1


def test_a_question_without_an_answer_bearing_page_gives_no_pairs(tiny_pages, tiny_index) -> None:
    item = QAItem("t-2", "Which chess piece moves in an L shape?", ("knight",))
    pairs, counts = question_pairs(
        item, "tiny", tiny_index.search(item.question, 15), PositiveIndex(tiny_pages), random.Random(0), 2
    )
    assert pairs == [] and counts["negative"] >= 1


def test_build_pairs_is_balanced_counted_and_seeded(tiny_pages, tiny_index) -> None:
    questions = {
        "tiny": [
            MONA,
            QAItem("t-3", "Who first reached the summit of Mount Everest?", ("Edmund Hillary", "Tenzing Norgay")),
            QAItem("t-4", "When did the Titanic sink?", ("1953",)),  # only ambiguous or negative pages
        ]
    }
    positives = PositiveIndex(tiny_pages)
    pairs, report = build_pairs(questions, tiny_index, positives, per_question=1, seed=3)
    again, _ = build_pairs(questions, tiny_index, positives, per_question=1, seed=3)
    assert [(p.question_id, p.page.id) for p in pairs] == [(p.question_id, p.page.id) for p in again]
    counts = report["datasets"]["tiny"]
    assert counts["pairs"] == {"positive": 2, "negative": 2}
    assert counts["questions_read"] == 3 and counts["questions_used"] == 2
    assert report["pairs"] == 4 and report["k"] == 15
    limited, _ = build_pairs(questions, tiny_index, positives, per_question=1, limit=2, seed=3)
    assert len(limited) == 2


def test_positives_may_come_from_deeper_pages_but_negatives_only_from_the_pages_a_run_reads(tiny_pages) -> None:
    from raqa.retrieval.index import Hit

    # the Mona Lisa page ranked last (8th): with k = 3 it is still a positive, and the negatives are ranks 1-3
    order = ["p1", "p6", "p5", "p2", "p7", "p8", "p4", "p3"]
    hits = [Hit(rank, 1.0 / rank, page(tiny_pages, pid)) for rank, pid in enumerate(order, start=1)]
    for seed in range(5):
        pairs, counts = question_pairs(MONA, "tiny", hits, PositiveIndex(tiny_pages), random.Random(seed), 2, k=3)
        assert [p.page.id for p in pairs if p.positive] == ["p3"]
        assert [p.rank for p in pairs if not p.positive] and all(p.rank <= 3 for p in pairs if not p.positive)
        assert counts["negative"] == 7  # every page is still labelled and counted


def test_build_pairs_reports_the_depth_and_never_takes_negatives_below_k(tiny_pages, tiny_index) -> None:
    positives = PositiveIndex(tiny_pages)
    pairs, report = build_pairs({"tiny": [MONA]}, tiny_index, positives, per_question=1, seed=0, k=2, depth=8)
    assert report["k"] == 2 and report["depth"] == 8
    assert all(p.rank <= 2 for p in pairs if not p.positive) and any(p.positive for p in pairs)


def test_the_stricter_rule_skips_a_same_kind_answer_from_a_sentence_sharing_one_word() -> None:
    # the one-word rule makes "Neptune" on the Ceres page a positive for Triton; min_shared 2 does not
    ceres = Page("c", "Ceres (dwarf planet)", "Ceres is the only dwarf planet whose orbit lies within that of Neptune.")
    question, answers = "Triton is the largest moon of which planet?", ["Neptune"]
    assert label_page(question, answers, ceres, PositiveIndex([ceres]))[0] == "positive"
    assert label_page(question, answers, ceres, PositiveIndex([ceres]), min_shared=2) == ("ambiguous", None, None)
    neptune = Page("n", "Neptune", "Triton, its largest moon, orbits Neptune backwards.")
    label, start, answer = label_page(question, answers, neptune, PositiveIndex([neptune]), min_shared=2)
    assert (label, answer) == ("positive", "Neptune")  # "triton", "largest", "moon" besides the answer's word


def test_the_answer_s_own_words_do_not_count_towards_the_stricter_rule() -> None:
    page_ = Page("w", "Wright brothers", "Orville Wright flew first.")
    question = "Which brother was called Orville Wright?"  # shares "orville", "wright" only through the answer
    assert label_page(question, ["Orville Wright"], page_, PositiveIndex([page_]), min_shared=2)[0] == "ambiguous"
    assert label_page(question, ["Orville Wright"], page_, PositiveIndex([page_]))[0] == "positive"


def test_build_pairs_reports_its_rule_and_the_stricter_rule_keeps_fewer(tiny_pages, tiny_index) -> None:
    positives = PositiveIndex(tiny_pages)
    loose, report = build_pairs({"tiny": [MONA]}, tiny_index, positives, per_question=1, seed=0)
    strict, strict_report = build_pairs({"tiny": [MONA]}, tiny_index, positives, per_question=1, seed=0, min_shared=9)
    assert report["min_shared"] == 1 and strict_report["min_shared"] == 9
    assert sum(p.positive for p in loose) == 1 and strict == []
