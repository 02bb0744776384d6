"""Resources: caches survive a crash mid-write, leftovers are swept, and memory stays flat over 200 runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from scripted import ScriptedBackend

from lab.ops.reliability import rss_mib, soak
from raqa.config import AppConfig, RunForm
from raqa.retrieval.atomic import STALE_AFTER_S, replace_folder, sweep
from raqa.retrieval.index import BM25Index, index_folder, load_or_build
from raqa.service import Service

ROOT = Path(__file__).resolve().parent.parent

# The child builds the tiny corpus's index into the cache and is killed (SIGKILL, no cleanup of any
# kind) at the named moment of the write.
CRASHING_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    import bm25s
    from conftest import TINY_PAGES
    from raqa.retrieval import atomic
    from raqa.retrieval.index import load_or_build

    moment = {moment!r}
    original_save = bm25s.BM25.save
    original_rename = Path.rename

    def save(self, folder, **kwargs):
        if moment == "mid-file":
            (Path(folder) / "params.index.json").write_text('{{"k1": 0.9, "b"')  # half a file
            os.kill(os.getpid(), signal.SIGKILL)
        original_save(self, folder, **kwargs)

    def rename(self, target):
        if moment == "before-rename" or (moment == "between-renames" and atomic.OLD_MARK in str(target)):
            result = original_rename(self, target) if moment == "between-renames" else None
            os.kill(os.getpid(), signal.SIGKILL)
        return original_rename(self, target)

    bm25s.BM25.save = save
    Path.rename = rename
    load_or_build(list(TINY_PAGES), Path({cache!r}))
    """
)


def _crash_while_writing(cache: Path, moment: str) -> None:
    code = CRASHING_CHILD.format(tests=str(ROOT / "tests"), moment=moment, cache=str(cache))
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == -9, result.stderr  # it really was killed mid-write


@pytest.mark.parametrize("moment", ["mid-file", "before-rename"])
def test_a_crash_mid_write_leaves_no_half_index(tiny_pages, tiny_index, broad_question, tmp_path, moment) -> None:
    cache = tmp_path / "cache"
    _crash_while_writing(cache, moment)
    folder = index_folder(cache, tiny_pages, "wordpiece")
    assert not folder.exists()  # the half-written index never took the cache's name
    index = load_or_build(tiny_pages, cache)
    assert index.search(broad_question, 8) == tiny_index.search(broad_question, 8)
    assert (folder / "raqa.json").is_file()


def test_a_crash_while_replacing_a_corrupt_index_leaves_a_cache_that_still_works(
    tiny_pages, tiny_index, broad_question, tmp_path
) -> None:
    cache = tmp_path / "cache"
    folder = index_folder(cache, tiny_pages, "wordpiece")
    folder.mkdir(parents=True)
    (folder / "raqa.json").write_text("corrupt")
    _crash_while_writing(cache, "between-renames")
    index = load_or_build(tiny_pages, cache)
    assert index.search(broad_question, 8) == tiny_index.search(broad_question, 8)
    assert BM25Index.load(folder, tiny_pages).search(broad_question, 8) == tiny_index.search(broad_question, 8)
    # the next write swept the old folder the crash left behind
    index.save(folder)
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]


def test_sweep_removes_only_leftovers_of_dead_writers(tmp_path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    final = tmp_path / "cache"
    names = {
        "stale": f"cache.tmp-{os.getpid()}-a",  # a live pid, but an hour old
        "live": f"cache.tmp-{os.getpid()}-b",
        "dead": f"cache.tmp-{dead.stdout.strip()}-c",
        "old": "cache.old-d",
    }
    for name in ["cache", *names.values()]:
        (tmp_path / name).mkdir()
    long_ago = time.time() - STALE_AFTER_S - 10
    os.utime(tmp_path / names["stale"], (long_ago, long_ago))
    removed = sorted(p.name for p in sweep(final))
    assert removed == sorted([names["stale"], names["dead"], names["old"]])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", names["live"]]  # a live writer's folder stays


def test_a_failed_write_keeps_the_old_folder(tmp_path) -> None:
    final = tmp_path / "cache"
    replace_folder(final, lambda tmp: (tmp / "v.txt").write_text("1"))

    def failing(tmp: Path) -> None:
        (tmp / "v.txt").write_text("2")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_folder(final, failing)
    assert (final / "v.txt").read_text() == "1"
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]


def test_memory_stays_flat_over_200_runs(tiny_pages, tiny_index, tmp_path, capsys) -> None:
    backend = ScriptedBackend(lambda messages: "ANSWER: Mount Everest\nPAGE: p2\nSENTENCE: 1")
    service = Service(AppConfig(cache_dir=tmp_path), tiny_pages, tiny_index, backend, "tiny", {})
    questions = ["Who first reached the summit of Everest?", "Where does the Danube end?", "Who painted the Mona Lisa?"]
    form = RunForm(window=8, k=8)  # one window a run: the test is about memory, not time
    result = soak(service, questions, 200, form, progress=lambda done, total: backend.requests.clear())
    assert result["runs"] == 200 and len(result["rss_mib"]) == 200
    # Python's allocator grows in steps; a leak of even 10 KB a run would add 2 MB
    assert result["growth_after_warmup_mib"] < 2.0, result["rss_mib"][::20]
    assert rss_mib() > 0
    with capsys.disabled():
        print(f"\n200 runs: RSS {result['rss_after_warmup_mib']:.1f} -> {result['rss_last_mib']:.1f} MiB")
