"""The embedded store's event ring: reads after an id, `$`, blocking reads and the bound."""

from __future__ import annotations

import asyncio

import pytest

from proxy.adapters.memory.events import EventRing


def ring_of(*ids: str, maxlen: int = 100) -> EventRing:
    ring = EventRing(maxlen=maxlen)
    for entry_id in ids:
        ring.events.append((entry_id, {"id": entry_id}))
    return ring


async def write(ring: EventRing, entry_id: str) -> None:
    """What `MemoryStore.emit_event` does: append, then wake readers only if any wait."""
    ring.events.append((entry_id, {"id": entry_id}))
    if ring.readers_waiting:
        async with ring.new_event:
            ring.new_event.notify_all()


def ids(found: list[tuple[str, dict[str, str]]]) -> list[str]:
    return [entry_id for entry_id, _ in found]


@pytest.mark.parametrize(
    ("last_id", "count", "expected"),
    [
        ("0-0", 10, ["9-1", "9-2", "10-1", "100-1"]),
        ("0", 10, ["9-1", "9-2", "10-1", "100-1"]),
        ("9-1", 10, ["9-2", "10-1", "100-1"]),
        ("9-5", 10, ["10-1", "100-1"]),  # ids compare as numbers, not as text
        ("10", 10, ["10-1", "100-1"]),  # a bare time is that time's sequence 0
        ("0-0", 2, ["9-1", "9-2"]),
        ("100-1", 10, []),
        ("$", 10, []),
    ],
)
async def test_read_gives_up_to_count_events_after_the_id_oldest_first(
    last_id: str, count: int, expected: list[str]
) -> None:
    ring = ring_of("9-1", "9-2", "10-1", "100-1")
    assert ids(await ring.read(last_id, block_ms=0, count=count)) == expected


async def test_read_hands_out_copies_of_the_events() -> None:
    ring = ring_of("1-1")
    [(_, fields)] = await ring.read("0-0", block_ms=0, count=1)
    fields["id"] = "changed"
    assert ring.events[0] == ("1-1", {"id": "1-1"})


async def test_a_blocking_read_with_nothing_new_returns_nothing_after_its_wait() -> None:
    ring = ring_of("1-1")
    assert await ring.read("$", block_ms=10, count=5) == []
    assert ring.readers_waiting == 0


async def test_a_blocking_read_returns_the_next_write() -> None:
    ring = ring_of("1-1")
    reader = asyncio.create_task(ring.read("$", block_ms=5_000, count=5))
    await asyncio.sleep(0)  # the reader runs until it waits
    assert ring.readers_waiting == 1
    await write(ring, "2-1")
    assert ids(await reader) == ["2-1"]
    assert ring.readers_waiting == 0


async def test_the_ring_drops_the_oldest_event_once_full() -> None:
    ring = ring_of(maxlen=2)
    for entry_id in ("1-1", "1-2", "1-3"):
        await write(ring, entry_id)
    assert ids(await ring.read("0-0", block_ms=0, count=10)) == ["1-2", "1-3"]
