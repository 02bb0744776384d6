"""Write a cache folder so that a crash at any moment leaves the old folder, no folder or the new one,
never a half-written one.

The folder is written under a temporary sibling name, flushed to disk, then renamed into place (a
rename within one file system is atomic). Leftovers of a crashed write are swept on the next write.
Left out: locking between processes; two processes building the same cache both succeed and the
last rename wins, which is harmless because both wrote the same content.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

TMP_MARK = ".tmp-"
OLD_MARK = ".old-"
STALE_AFTER_S = 3600.0  # a temporary folder this old belongs to a writer that died


BuildProgress = Callable[[str, float], None]  # a cache being built: a message and the share done (0 to 1)


def _flush(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb+") as f:
                os.fsync(f.fileno())


def _writer_is_gone(tmp: Path) -> bool:
    """A temporary folder is named <final>.tmp-<pid>-<random>; is that process still running?"""
    try:
        pid = int(tmp.name.rsplit(TMP_MARK, 1)[1].split("-", 1)[0])
    except (IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by someone else
        return False
    return False


def sweep(final: Path, now: float | None = None) -> list[Path]:
    """Remove what crashed writes of `final` left behind; returns what was removed.

    A temporary folder goes when its writer's process is gone or it is older than STALE_AFTER_S;
    a renamed-away old folder always goes (its writer was about to delete it).
    """
    now = time.time() if now is None else now
    removed = []
    for sibling in final.parent.glob(final.name + ".*"):
        is_tmp = TMP_MARK in sibling.name
        stale_tmp = is_tmp and (_writer_is_gone(sibling) or now - sibling.stat().st_mtime > STALE_AFTER_S)
        if stale_tmp or OLD_MARK in sibling.name:
            shutil.rmtree(sibling, ignore_errors=True)
            removed.append(sibling)
    return removed


def replace_folder(final: Path, write: Callable[[Path], None]) -> None:
    """Call write(tmp) to fill a new temporary folder, then swap it in for `final`.

    Example:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "cache"
        >>> replace_folder(target, lambda tmp: (tmp / "data.txt").write_text("ok"))
        >>> (target / "data.txt").read_text()
        'ok'
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    sweep(final)
    tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}{TMP_MARK}{os.getpid()}-", dir=final.parent))
    try:
        write(tmp)
        _flush(tmp)
        if final.exists():
            # subtle: rename the old folder away first; a crash between the two renames leaves no
            # folder (rebuilt on the next start), never a mix of old and new files
            old = final.with_name(final.name + OLD_MARK + uuid.uuid4().hex[:8])
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
