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
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

from proxy.memory.fact import clean_line
from proxy.memory.ledger import FactLedger

SESSIONS_MAX = 4096
HEADER = (
    "# Facts ctxproxy learned at compactions, newest last. Kept by the proxy: see, forget and\n"
    "# export them with `ctxproxy memory` (edits made here while it runs are overwritten).\n"
)

Owner = tuple[str, str | None]

log = logging.getLogger(__name__)


class FactFiles:
    """Ledgers by (tenant, session or None), kept in `dir_for(tenant)`'s files when it names a
    folder (the tenant workspace's `memory/`)."""

    def __init__(
        self, dir_for: Callable[[str], Path | None], *, sessions_max: int = SESSIONS_MAX
    ) -> None:
        self._dir_for = dir_for
        self._sessions_max = sessions_max
        self._ledgers: OrderedDict[Owner, FactLedger] = OrderedDict()
        self._writing = asyncio.Lock()

    def _path(self, tenant: str, owner: str | None) -> Path | None:
        folder = self._dir_for(tenant)
        if folder is None:
            return None
        return folder / "learned.md" if owner is None else folder / "sessions" / f"{owner}.md"

    async def ledger(self, tenant: str, owner: str | None) -> FactLedger:
        """The owner's ledger, read from its file on first use."""
        key = (tenant, owner)
        found = self._ledgers.get(key)
        if found is None:
            path = self._path(tenant, owner)
            lines = await asyncio.to_thread(_read, path) if path is not None else ()
            found = self._ledgers.get(key) or FactLedger(lines)  # another load may have won
            self._ledgers[key] = found
            self._evict()
        self._ledgers.move_to_end(key)
        return found

    def _evict(self) -> None:
        sessions = [key for key in self._ledgers if key[1] is not None]
        for key in sessions[: max(0, len(sessions) - self._sessions_max)]:
            del self._ledgers[key]

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
        async with self._writing:
            held = await self.ledger(tenant, owner)
            changed = held.copy()
            count = change(changed)
            if changed.lines is held.lines:
                return count
            path = self._path(tenant, owner)
            if path is not None:
                text = HEADER + "".join(f"{x}\n" for x in changed.lines)
                try:
                    await asyncio.to_thread(_write, path, text)
                except OSError as exc:
                    log.warning("learned facts not written (%s): %s", type(exc).__name__, path)
                    raise
            self._ledgers[(tenant, owner)] = changed
            self._ledgers.move_to_end((tenant, owner))
            self._evict()
        return count


def _read(path: Path) -> tuple[str, ...]:
    """The file's facts; none when it is missing or cannot be read (logged: a request never
    fails for its facts)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ()
    except OSError as exc:
        log.warning("learned facts unreadable (%s): %s", type(exc).__name__, path)
        return ()
    return tuple(line for line in map(clean_line, text.splitlines()) if line is not None)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
