"""The embedded store's events: a bounded in-process ring of `(id, fields)`, oldest first.

Ids are `<ms>-<seq>` like Redis stream ids and compare as that pair of numbers. `MemoryStore`
writes (its `emit_event` is on every request, so it appends to `events` itself, with no call in
between) and wakes `new_event` only when `readers_waiting`; `read` serves the operator's reads.
Once `maxlen` events are held, each new one drops the oldest.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque


class EventRing:
    """The ring and what a writer needs: the sequence for ids and the readers' condition."""

    __slots__ = ("events", "new_event", "readers_waiting", "seq")

    def __init__(self, *, maxlen: int) -> None:
        self.events: deque[tuple[str, dict[str, str]]] = deque(maxlen=maxlen)
        self.seq = itertools.count(1)
        self.new_event = asyncio.Condition()
        self.readers_waiting = 0

    async def read(
        self, last_id: str, *, block_ms: int, count: int
    ) -> list[tuple[str, dict[str, str]]]:
        """`EventStore.read_events` on the ring: copies of its events; a wait ends at the next
        write (then [] if it brought none)."""
        if last_id == "$":
            last_id = self.events[-1][0] if self.events else "0-0"
        found = self._after(last_id, count)
        if not found and block_ms > 0:
            self.readers_waiting += 1
            try:
                async with self.new_event:
                    await asyncio.wait_for(self.new_event.wait(), block_ms / 1000)
            except TimeoutError:
                return []
            finally:
                self.readers_waiting -= 1
            found = self._after(last_id, count)
        return found

    def _after(self, last_id: str, count: int) -> list[tuple[str, dict[str, str]]]:
        key = _id_key(last_id)
        return [(i, dict(e)) for i, e in self.events if _id_key(i) > key][:count]


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms or 0), int(seq or 0)
