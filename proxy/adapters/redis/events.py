"""The events stream in shards (`keys.SHARDS` streams), read back as one stream in id order.

A reader asks every shard at once for its entries after the last id it saw, with the shard
node's clock (`codec.READ_SHARD`, one script per shard: its clock and its range at one
instant). Redis gives an entry an id no lower than its node's clock in milliseconds, so what a
shard will add later sorts at or after that time. `merge_shards` therefore returns, in id
order, only what no shard can still add an entry before: entries below every shard's clock
(and, for a shard that filled its `count`, up to its last entry). An entry it holds back is
returned by the next read; one id is never split across two reads, so `after=id` skips none.

Shards may give two entries the same id; they sort by shard then, and either both or neither
are returned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from proxy.adapters.redis.codec import READ_SHARD, read_entries
from proxy.adapters.redis.keys import SHARDS, Keys
from proxy.adapters.redis.pool import Command
from proxy.adapters.redis.wire import Wire

EventId = tuple[int, int]
Entry = tuple[str, dict[str, str]]
LAST_SEQ = 2**64 - 1
POLL_S = 0.05
"""How often a waiting events reader asks the shards again."""
SETTLE_S = 0.002
"""How long a reader waits for an event held back for a shard's clock (one millisecond)."""


@dataclass(frozen=True, slots=True)
class ShardRead:
    """One shard's answer: its node's clock (ms) and up to `count` entries after the start."""

    now_ms: int
    entries: Sequence[Entry]
    full: bool
    """It returned `count` entries: there may be more after its last one."""


def parse_id(text: str) -> EventId:
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def merge_shards(reads: Sequence[ShardRead], *, count: int) -> tuple[list[Entry], bool]:
    """(Entries that are final, in id order, at most `count` unless more share the last id;
    whether an entry was held back for a shard's clock — read again shortly to get it)."""
    horizon = min(
        (parse_id(read.entries[-1][0]) if read.full else (read.now_ms - 1, LAST_SEQ))
        for read in reads
    )
    ranked = sorted(
        (parse_id(entry[0]), shard, entry)
        for shard, read in enumerate(reads)
        for entry in read.entries
    )
    final = [(event_id, entry) for event_id, _, entry in ranked if event_id <= horizon]
    held = len(final) < len(ranked)
    if len(final) > count:
        cut = final[count][0]
        kept = [item for item in final[:count] if item[0] < cut]
        final = kept or [item for item in final if item[0] == cut]
    return [entry for _, entry in final], held


def shard_reads(keys: Keys, after: str, count: int) -> list[list[Command]]:
    """One batch per shard: its clock and its entries after `after` (exclusive)."""
    return [[("EVAL", READ_SHARD, 1, keys.events(n), f"({after}", count)] for n in range(SHARDS)]


async def read_once(wire: Wire, keys: Keys, after: str, count: int) -> list[ShardRead]:
    replies = await wire.run(shard_reads(keys, after, count))
    return [_shard_read(reply, count) for [reply] in replies]


def _shard_read(reply: Any, count: int) -> ShardRead:
    (seconds, micros), entries = reply
    found = read_entries(entries)
    return ShardRead(
        now_ms=int(seconds) * 1000 + int(micros) // 1000, entries=found, full=len(found) >= count
    )


def after_now(reads: Sequence[ShardRead]) -> str:
    """The id that `$` (only events from now on) stands for: just below every shard's clock."""
    return f"{min(read.now_ms for read in reads) - 1}-{LAST_SEQ}"


async def wait_for(
    read: Callable[[str, int], Awaitable[list[ShardRead]]],
    last_id: str,
    *,
    block_ms: int,
    count: int,
) -> list[Entry]:
    """The events after `last_id` (`$`: from now on) that `read` (every shard once) finds, merged
    (`merge_shards`); without any yet, the shards are asked again every `POLL_S` until
    `block_ms` is over."""
    deadline = time.monotonic() + block_ms / 1000
    after = last_id
    while True:
        reads = await read(after, count)
        if after == "$":
            after = after_now(reads)
            continue
        found, held = merge_shards(reads, count=count)
        if found:
            return found
        left = deadline - time.monotonic()
        if not held and left <= 0:
            return []
        await asyncio.sleep(SETTLE_S if held else min(POLL_S, left))
