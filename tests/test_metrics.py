import pytest

from lab.stats import mean_interval, proportion, wilson
from raqa.evaluation.metrics import answer_contained, exact_match, f1, is_positive


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("The Beatles", ["beatles"], True),
        ("Beatles!", ["The Beatles"], True),
        ("Paul", ["Beatles"], False),
        (None, ["x"], False),
        ("", ["x"], False),
    ],
)
def test_exact_match(prediction, golds, expected):
    assert exact_match(prediction, golds) is expected


def test_f1_takes_the_best_gold():
    assert f1("Leonardo da Vinci", ["da Vinci", "Michelangelo"]) == pytest.approx(0.8)
    assert f1("nothing", ["da Vinci"]) == 0.0
    assert f1(None, ["x"]) == 0.0


def test_containment_and_positive_pages():
    assert answer_contained("It was painted by Leonardo da Vinci.", ["Leonardo da Vinci"])
    assert not answer_contained("It was painted by Leonardo.", ["Leonardo da Vinci"])
    assert is_positive("Titanic sank in 1912.", ["1912"])
    assert not is_positive("Titanic sank in 19120.", ["1912"])  # whole words only


def test_wilson_interval_contains_the_estimate_and_stays_in_range():
    for successes, n in [(0, 10), (10, 10), (3, 40), (27, 100)]:
        estimate = wilson(successes, n)
        assert 0.0 <= estimate.low <= estimate.value <= estimate.high <= 1.0
    assert wilson(0, 10).low == 0.0 and wilson(0, 10).high > 0.2  # zero successes is not certainty
    assert wilson(50, 100).high - wilson(50, 100).low < wilson(5, 10).high - wilson(5, 10).low


def test_proportion_and_bootstrap_mean():
    assert proportion([True, False, True, True]).value == 0.75
    estimate = mean_interval([1.0, 2.0, 3.0, 4.0, 5.0] * 10)
    assert estimate.value == 3.0 and estimate.low < 3.0 < estimate.high
    assert mean_interval([2.0] * 5) == (2.0, 2.0, 2.0, 5)
