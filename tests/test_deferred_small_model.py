"""The page starts before the small model (loading.DeferredBackend): it stands in by its name, loads once on first
use or from the thread the page starts, and a service loaded for the page defers it only when the 1.5B is the
default reader."""

from __future__ import annotations

import threading
import time

import pytest

from raqa.config import AppConfig
from raqa.loading import DeferredBackend, _defers, resolved
from raqa.service import CONCURRENT_RUNS, Service


class _Small:
    name = "small"
    batcher = object()

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _deferred(loads: list, seconds: float = 0.0) -> DeferredBackend:
    def load():
        loads.append(1)
        time.sleep(seconds)
        return _Small()

    return DeferredBackend(load, "small", shares_passes=True)


def test_it_stands_in_by_its_name_and_loads_once_on_first_use() -> None:
    loads: list = []
    small = _deferred(loads)
    assert (small.name, small.can_score, small.shares_passes, loads) == ("small", True, True, [])
    assert small.count_tokens("two words") == 2 and small.count_tokens("one") == 1
    assert loads == [1] and isinstance(resolved(small), _Small) and resolved(None) is None


def test_runs_that_need_it_while_the_page_loads_it_wait_for_that_one_load() -> None:
    loads: list = []
    small = _deferred(loads, seconds=0.3)
    threading.Thread(target=small.resolve, daemon=True).start()  # as the page's after_start does
    got = []
    askers = [threading.Thread(target=lambda: got.append(small.count_tokens("a b c"))) for _ in range(4)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(5)
    assert got == [3, 3, 3, 3] and loads == [1]


def test_the_page_queue_is_sized_before_the_small_model_loads(tiny_pages, tiny_index) -> None:
    loads: list = []
    service = Service(AppConfig(), tiny_pages, tiny_index, _deferred(loads), "tiny", {})
    assert service.concurrent_runs == CONCURRENT_RUNS and loads == []
    assert service.reader()[1] is service.backend and loads == []  # the base reader's backend is the stand-in


@pytest.mark.parametrize(
    ("settings", "defers"),
    [
        ({}, True),  # the page's defaults: the 1.5B reads, the small model can wait
        ({"reader": "base"}, False),  # the small model is the default reader: loaded at once
        ({"model": "some/other-model"}, False),  # not the embedded model
    ],
)
def test_only_the_embedded_small_model_behind_the_1p5b_is_deferred(settings, defers) -> None:
    assert _defers(AppConfig(**settings)) is defers


def test_a_failed_load_is_tried_once_and_its_error_told_again() -> None:
    from raqa.models.base import ModelError

    tries: list = []

    def broken():
        tries.append(1)
        raise ModelError("no weights")

    small = DeferredBackend(broken, "small", shares_passes=True)
    for _ in range(3):
        with pytest.raises(ModelError, match="no weights"):
            small.count_tokens("x")
    assert tries == [1] and not small.loaded


def test_a_line_and_the_offer_do_not_wait_for_the_small_model(tiny_pages, tiny_index) -> None:
    import copy

    loads: list = []
    service = Service(AppConfig(), tiny_pages, tiny_index, _deferred(loads), "tiny", {})
    line = service.line(service.backend)
    assert line.capacity == CONCURRENT_RUNS and line.model == "small"
    assert service.small_model_offer() is None and loads == []  # not loaded: it would not read soon
    copy.copy(service.backend)  # no endless __getattr__
    assert loads == []
