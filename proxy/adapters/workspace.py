"""`FileWorkspace`: the bootstrap files of a tenant, read from disk and re-read only on change.

Layers, lowest first: the managed directory (all tenants), the tenant's workspace, and the session
layer `<workspace>/sessions/<session>/`. In each, only the allow-listed names are opened, confined
to the layer's root (`proxy.adapters.workspace_paths`), and only a regular file is read. A missing,
unreadable or refused file is simply absent.

At most `max_file_bytes` are read per file and decoded as UTF-8 with replacement. A file is re-read
only when its (mtime_ns, size, inode) changes; `reads` counts actual opens (for tests and metrics).
A view is built (names resolved, files checked) at most once per `recheck_s` per tenant and session
and reused in between: a changed file is seen within `recheck_s` (1 s by default). A rebuilt view
equal to the one it replaces is dropped and the old object handed out again, so a consumer may key
on the view's identity (the bootstrap stage's assembly cache does).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson

from proxy.adapters import workspace_paths
from proxy.adapters.workspace_paths import (
    ALLOWED_FILES,
    OPEN_FLAGS,
    resolve_below,
    valid_session,
)
from proxy.types import WorkspaceView

__all__ = ["FileWorkspace"]

_Stamp = tuple[int, int, int]


def _stamp(st: os.stat_result) -> _Stamp:
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class FileWorkspace:
    """A `WorkspaceSource` over directories; one instance per app, not thread-safe (one loop)."""

    def __init__(
        self,
        *,
        workspaces: Mapping[str, Path],
        managed_dir: Path | None = None,
        max_file_bytes: int = 64 * 1024,
        max_cached_files: int = 4096,  # also bounds the cached views
        recheck_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_file_bytes < 1 or max_cached_files < 1:
            raise ValueError("max_file_bytes and max_cached_files must be at least 1")
        self._workspaces = dict(workspaces)
        self._managed = managed_dir
        self._max_bytes = max_file_bytes
        self._max_cached = max_cached_files
        self._recheck_s = recheck_s
        self._clock = clock
        self._cache: dict[str, tuple[_Stamp, str]] = {}
        self._views: dict[tuple[str | None, str | None], tuple[float, WorkspaceView]] = {}
        self.reads = 0

    def view(self, tenant: str, session: str) -> WorkspaceView:
        """The files of the managed and tenant layers and of the session layer, as read at most
        `recheck_s` ago.

        An unknown tenant gets the managed layer only; an invalid session id no session layer.
        """
        # Unknown tenants, and invalid session ids, share one entry: they get the same view.
        key = (
            tenant if tenant in self._workspaces else None,
            session if valid_session(session) else None,
        )
        now = self._clock()
        cached = self._views.pop(key, None)
        if cached is None or not 0 <= now - cached[0] < self._recheck_s:
            fresh = self._build(*key)
            cached = (now, cached[1] if cached is not None and cached[1] == fresh else fresh)
        if len(self._views) >= self._max_cached:
            self._views.pop(next(iter(self._views)))
        self._views[key] = cached
        return cached[1]

    def _build(self, tenant: str | None, session: str | None) -> WorkspaceView:
        workspace = self._workspaces.get(tenant) if tenant is not None else None
        files: dict[str, tuple[str, ...]] = {}
        for root in (self._managed, workspace):
            if root is not None:
                for key, text in self._read_layer(root).items():
                    files[key] = (*files.get(key, ()), text)
        session_root = (
            workspace_paths.find_session_root(workspace, session) if session is not None else None
        )
        session_files = self._read_layer(session_root) if session_root else {}
        return WorkspaceView(
            files=files, session_files=session_files, version=_version(files, session_files)
        )

    def _read_layer(self, root: Path) -> dict[str, str]:
        out: dict[str, str] = {}
        base = os.path.realpath(root)
        for key, name in ALLOWED_FILES:
            path = resolve_below(base, name)
            text = self._read(path) if path is not None else None
            if text is not None:
                out[key] = text
        return out

    def _read(self, path: str) -> str | None:
        """The cached text when the file's stamp is unchanged, else a fresh bounded read."""
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            self._cache.pop(path, None)
            return None
        cached = self._cache.get(path)
        if cached is not None and cached[0] == _stamp(st):
            return cached[1]
        self._cache.pop(path, None)
        loaded = self._load(path) if stat.S_ISREG(st.st_mode) else None
        if loaded is None:
            return None
        if len(self._cache) >= self._max_cached:
            self._cache.pop(next(iter(self._cache)))
        self._cache[path] = loaded
        return loaded[1]

    def _load(self, path: str) -> tuple[_Stamp, str] | None:
        """Open without following a final symlink, check it is a regular file, read the cap."""
        try:
            fd = os.open(path, OPEN_FLAGS)
        except OSError:
            return None
        self.reads += 1
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            chunks: list[bytes] = []
            remaining = self._max_bytes
            while remaining > 0 and (chunk := os.read(fd, remaining)):
                chunks.append(chunk)
                remaining -= len(chunk)
        except OSError:
            return None
        finally:
            os.close(fd)
        text = b"".join(chunks).decode("utf-8", errors="replace").removeprefix("\ufeff")
        return _stamp(st), text


def _version(files: Mapping[str, tuple[str, ...]], session_files: Mapping[str, str]) -> str:
    """A short digest of every text: equal contents give equal versions, in any process."""
    payload = orjson.dumps([sorted(files.items()), sorted(session_files.items())])
    return hashlib.sha256(payload).hexdigest()[:16]
