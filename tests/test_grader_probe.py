"""The grader probe's scoring (lab/evaluation/grader_probe.py): which sentences a focused grader sees, the best cut
that keeps half the right answers, and the summary the docs table reads. The model runs are not repeated here."""

from lab.evaluation.grader_probe import PROBES, best_precision_at_half, focused, summarise_probes


def test_focused_keeps_the_mentioning_sentences_and_their_neighbours_only():
    text = "One. Two. Three names Ann. Four. Five. Six. Seven names Ann again. Eight. Nine names Ann a third time."
    assert focused(text, "Ann") == "Two. Three names Ann. Four. Six. Seven names Ann again. Eight."
    assert focused(text, "Bob") is None


def test_the_best_cut_must_keep_half_of_the_right_answers():
    scored = [(0.9, True), (0.8, False), (0.7, True), (0.6, True), (0.5, False), (0.4, True)]
    best = best_precision_at_half(scored)
    # the cut at 0.9 is right 1 time in 1 but keeps only 1 of 4 right answers; 0.7 keeps 2 at 2 in 3, 0.6 keeps 3
    # at 3 in 4, 0.4 all 4 at 4 in 6
    assert best == {"precision": 0.75, "cut": 0.6, "kept_right": 3}
    assert best_precision_at_half([(0.3, False)])["precision"] is None


def _row(role, answer, label, mentioned=True, score=0.5):
    row = {"role": role, "answer": answer, "right": label, "label": label, "mentioned": mentioned}
    return {**row, **dict.fromkeys(PROBES, score if mentioned else None)} if mentioned else row


def test_the_summary_counts_windows_and_scores_only_the_answers_the_page_mentions():
    rows = [
        {**_row("gold", "Ann", True), **dict.fromkeys(PROBES, 0.9)},
        _row("negative", "Bob", False, score=0.2),
        _row("negative", "Cy", False, mentioned=False),
        _row("negative", None, False, mentioned=False),
    ]
    summary = summarise_probes(rows)
    assert (summary["windows"], summary["answered"], summary["graded"], summary["graded_right"]) == (4, 3, 2, 1)
    assert (summary["answered_on_answer_free_pages"], summary["answer_free_pages"]) == (2, 3)
    assert (summary["gold_page_right"], summary["gold_pages"]) == (1, 1)
    assert summary["signals"]["fresh"]["auc"]["value"] == 1.0
    assert summary["signals"]["fresh"]["best_precision_at_half_coverage"]["precision"] == 1.0
