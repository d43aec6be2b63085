"""The embedded store's learned facts: a `FactLedger` (`proxy.memory.ledger`) per tenant, and per
session with facts of its own, each written whole to a file in the tenant's workspace after every
change, so a restart keeps them: `memory/learned.md` (the tenant's) and
`memory/sessions/<session>.md` (a session's own). A file is read once, on the first use of its
ledger, and written through a `.tmp` file renamed over it (atomic); its lines are sanitised again
when read back (a person may have edited it while the proxy was stopped). A change (an add, a
forget) is all or nothing: the changed ledger is written first and held only once its file is,
so memory and disk never disagree (a failed write raises `OSError` and changes neither).

A tenant without a workspace keeps its facts in this process only: a restart forgets them. At
most `SESSIONS_MAX` session ledgers are held; the least recently used go, and come back from
their file when next used (without a workspace they are lost).

A session's facts expire with the session TTL after their last write, as the Redis store's do:
an expired ledger or file is dropped when touched (the session starts again with none), and the
tenant's other expired session files are swept out on a session's first use and then at most
once per `SWEEP_EVERY_S` (as the store sweeps sessions, and the archive old snapshots). The
tenant's own facts never expire.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

from proxy.adapters.memory.files import remove_stale, replace_file
from proxy.memory.fact import clean_line
from proxy.memory.ledger import FactLedger

SESSIONS_MAX = 4096
SWEEP_EVERY_S = 3600.0
"""How often, at most, expired session files nobody reads again are looked for and removed."""
HEADER = (
    "# Facts ctxproxy learned at compactions, newest last. Kept by the proxy: see, forget and\n"
    "# export them with `ctxproxy memory` (edits made here while it runs are overwritten).\n"
)

Owner = tuple[str, str | None]

log = logging.getLogger(__name__)


class FactFiles:
    """Ledgers by (tenant, session or None), kept in `dir_for(tenant)`'s files when it names a
    folder (the tenant workspace's `memory/`); a session's expire `session_ttl_s` after their
    last write (never, when None)."""

    def __init__(
        self,
        dir_for: Callable[[str], Path | None],
        *,
        sessions_max: int = SESSIONS_MAX,
        session_ttl_s: float | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._dir_for = dir_for
        self._sessions_max = sessions_max
        self._ttl_s = session_ttl_s
        self._now = now  # wall time: compared with the files' modification times
        self._ledgers: OrderedDict[Owner, FactLedger] = OrderedDict()
        self._written_at: dict[Owner, float] = {}  # session ledgers held: their last write
        self._swept_at: dict[str, float] = {}  # by tenant
        self._writing = asyncio.Lock()

    def _path(self, tenant: str, owner: str | None) -> Path | None:
        folder = self._dir_for(tenant)
        if folder is None:
            return None
        return folder / "learned.md" if owner is None else folder / "sessions" / f"{owner}.md"

    def _expired(self, written_at: float | None) -> bool:
        return (
            self._ttl_s is not None
            and written_at is not None
            and written_at < self._now() - self._ttl_s
        )

    async def ledger(self, tenant: str, owner: str | None) -> FactLedger:
        """The owner's ledger, read from its file on first use. A session's that expired is
        dropped when touched (empty from then on, its file removed); the first use of a
        session's, and one at most every `SWEEP_EVERY_S`, sweeps out the expired others."""
        found, expired = await self._get(tenant, owner)
        if owner is not None and (expired or self._sweep_due(tenant)):
            async with self._writing:
                await self._sweep(tenant, force=expired)
        return found

    async def _get(self, tenant: str, owner: str | None) -> tuple[FactLedger, bool]:
        """The owner's ledger, and whether an expired one was met on the way (then the ledger
        is a new, empty one)."""
        key = (tenant, owner)
        expired = False
        found = self._ledgers.get(key)
        if found is not None and self._expired(self._written_at.get(key)):
            self._drop(key)
            found, expired = None, True
        if found is None:
            path = self._path(tenant, owner)
            lines, written_at = await asyncio.to_thread(_read, path) if path else ((), None)
            if owner is not None and self._expired(written_at):
                lines, written_at, expired = (), None, True
            found = self._ledgers.get(key)  # another load may have won
            if found is None:
                found = self._ledgers[key] = FactLedger(lines)
                if owner is not None and written_at is not None:
                    self._written_at[key] = written_at
                self._evict()
        self._ledgers.move_to_end(key)
        return found, expired

    def _drop(self, key: Owner) -> None:
        self._ledgers.pop(key, None)
        self._written_at.pop(key, None)

    def _evict(self) -> None:
        sessions = [key for key in self._ledgers if key[1] is not None]
        for key in sessions[: max(0, len(sessions) - self._sessions_max)]:
            self._drop(key)

    def _sweep_due(self, tenant: str) -> bool:
        last = self._swept_at.get(tenant)
        return self._ttl_s is not None and (last is None or self._now() - last >= SWEEP_EVERY_S)

    async def _sweep(self, tenant: str, *, force: bool) -> None:
        """Drop the expired session ledgers held, and remove the expired session files of the
        tenant's folder; unless `force`, only when due. Called with `_writing` held, so no
        file is written meanwhile."""
        if self._ttl_s is None or not (force or self._sweep_due(tenant)):
            return
        now = self._swept_at[tenant] = self._now()
        for key in [key for key, at in self._written_at.items() if self._expired(at)]:
            self._drop(key)
        folder = self._dir_for(tenant)
        if folder is not None:
            await asyncio.to_thread(
                remove_stale, folder / "sessions", "*.md", before=now - self._ttl_s
            )

    async def add(
        self, tenant: str, owner: str | None, lines: Sequence[str], *, max_lines: int
    ) -> int:
        return await self._change(tenant, owner, lambda x: x.add(lines, max_lines=max_lines))

    async def forget(self, tenant: str, owner: str | None, pattern: str) -> int:
        return await self._change(tenant, owner, lambda x: x.forget(pattern))

    async def _change(
        self, tenant: str, owner: str | None, change: Callable[[FactLedger], int]
    ) -> int:
        """Apply `change` to a copy of the owner's ledger, write the copy's file, and only then
        hold the copy: all or nothing. Raises `OSError` when the file cannot be written (then
        the ledger held, and its file, stay as they were). Changes are made one at a time, so
        none is lost and the last file written holds the newest lines."""
        key = (tenant, owner)
        async with self._writing:
            held, expired = await self._get(tenant, owner)
            changed = held.copy()
            count = change(changed)
            if changed.lines is not held.lines:
                await self._write(tenant, owner, changed)
                self._ledgers[key] = changed
                self._ledgers.move_to_end(key)
                if owner is not None:
                    self._written_at[key] = self._now()
                self._evict()
            if owner is not None:
                await self._sweep(tenant, force=expired)
        return count

    async def _write(self, tenant: str, owner: str | None, ledger: FactLedger) -> None:
        path = self._path(tenant, owner)
        if path is None:
            return
        text = HEADER + "".join(f"{x}\n" for x in ledger.lines)
        try:
            await asyncio.to_thread(replace_file, path, text.encode())
        except OSError as exc:
            log.warning("learned facts not written (%s): %s", type(exc).__name__, path)
            raise


def _read(path: Path) -> tuple[tuple[str, ...], float | None]:
    """The file's facts and when it was last written; none (and None) when it is missing or
    cannot be read (logged: a request never fails for its facts)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        written_at = path.stat().st_mtime
    except FileNotFoundError:
        return (), None
    except OSError as exc:
        log.warning("learned facts unreadable (%s): %s", type(exc).__name__, path)
        return (), None
    lines = tuple(line for line in map(clean_line, text.splitlines()) if line is not None)
    return lines, written_at
