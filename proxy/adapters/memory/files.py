"""The embedded store's file handling, shared by the archive and the facts files: a file
replaced whole through a `.tmp` beside it, and a sweep of the files no longer rewritten. Both
run in a worker thread (the callers' `asyncio.to_thread`) and create nothing but what they name.
"""

from __future__ import annotations

import stat
from pathlib import Path


def replace_file(path: Path, data: bytes) -> None:
    """Write `data` to `path` through `<name>.tmp` beside it, so a reader never sees half a file;
    the folder is created if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def remove_stale(folder: Path, pattern: str, *, before: float) -> None:
    """Remove the regular files of `folder` matching `pattern` last written before `before`
    (seconds since the epoch). Best effort: a file it cannot look at or remove is left, and
    nothing else is touched."""
    for path in folder.glob(pattern):
        try:
            status = path.lstat()
            if stat.S_ISREG(status.st_mode) and status.st_mtime < before:
                path.unlink()
        except OSError:
            continue
