"""Which paths of a workspace may be opened: the allow-list, the session layer, confinement.

Only the relative names of `ALLOWED_FILES` are ever opened in a layer. A name is resolved and
refused when it escapes its layer's root (`..`, absolute, a symlink leading outside); `OPEN_FLAGS`
make the final open refuse a symlink and never block. A session id outside `SESSION_ID` (or `.`,
`..`) has no session layer; a valid one's is `<workspace>/sessions/<session>/` when that is a
directory inside the workspace. Nothing here reads a file.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

ALLOWED_FILES = (
    ("soul", "soul.md"),
    ("user", "user.md"),
    ("agent", "agent.md"),
    ("memory", "memory/MEMORY.md"),
)
SESSIONS_DIR = "sessions"
SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def resolve_inside(root: Path, relative: str) -> Path | None:
    """`root/relative` with every symlink resolved, or None unless that lies strictly below
    `root` (a link back to `root` itself is refused too).

    Refuses absolute names, empty, `.` and `..` components and a NUL byte outright.
    """
    target = resolve_below(os.path.realpath(root), relative)
    return Path(target) if target is not None else None


def resolve_below(base: str, relative: str) -> str | None:
    """Like `resolve_inside`, on strings, for a `base` that is already resolved.

    Walks the components below `base` with `lstat` (cheap: one or two per name) and pays for a
    full `realpath` only when one of them is a symlink.
    """
    parts = relative.split("/")
    if "\0" in relative or any(part in ("", ".", "..") for part in parts):
        return None
    path = base
    for part in parts:
        path = os.path.join(path, part)
        try:
            is_link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            return os.path.join(base, *parts)  # missing: nothing there to follow
        if is_link:
            path = os.path.realpath(os.path.join(base, *parts))
            break
    return path if path.startswith(base.rstrip(os.sep) + os.sep) else None


def valid_session(session: str) -> bool:
    """Whether `session` may name a session layer's directory: one safe path component."""
    return session not in (".", "..") and SESSION_ID.fullmatch(session) is not None


def find_session_root(workspace: Path | None, session: str) -> Path | None:
    """The session layer's directory, if `session` is a valid id and the directory exists
    inside the workspace."""
    if workspace is None or not valid_session(session):
        return None
    root = resolve_inside(workspace, f"{SESSIONS_DIR}/{session}")
    return root if root is not None and root.is_dir() else None
