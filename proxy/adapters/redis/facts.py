"""Learned facts in Redis: one hash per owner (`P{t}:memory`, or `P{t:s}:memory` for a session's
own), so one key holds them all and a Lua script over it is atomic, in a cluster too.

Fields: each fact's normalised text (`proxy.memory.fact.fact_key`) → `"<seq> <line>"`, `seq`
its place in the order learned; `~n`, the last `seq` given out; `~v`, a random token replaced
by every change. `ADD_FACTS` adds a fact only if its key is new (so replicas adding at once
write it once), then drops the oldest past the cap. A request reads only `~v` (one command in
its load's round trip: on a cluster its own batch, sent with the session's): the facts are read
again only when it changed, else they come from this process's cache. `FORGET_FACTS` deletes
and changes `~v` at once.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from proxy.adapters.redis.codec import decode_hash, read_hash_reply
from proxy.adapters.redis.keys import Keys
from proxy.errors import StoreUnavailable
from proxy.memory.fact import clean_line, fact_key, matches

# KEYS: the hash. ARGV: max_lines, version token, ttl (0: none), then key, line pairs.
ADD_FACTS = """
local added = 0
for i = 4, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then
    local seq = redis.call('HINCRBY', KEYS[1], '~n', 1)
    redis.call('HSET', KEYS[1], ARGV[i], seq .. ' ' .. ARGV[i + 1])
    added = added + 1
  end
end
if added == 0 then return 0 end
local over = redis.call('HLEN', KEYS[1]) - 1 - redis.call('HEXISTS', KEYS[1], '~v')
over = over - tonumber(ARGV[1])
if over > 0 then
  local all = redis.call('HGETALL', KEYS[1])
  local facts = {}
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 1) ~= '~' then
      facts[#facts + 1] = {tonumber(string.match(all[i + 1], '^%d+')), all[i]}
    end
  end
  table.sort(facts, function(a, b) return a[1] < b[1] end)
  for i = 1, over do redis.call('HDEL', KEYS[1], facts[i][2]) end
end
redis.call('HSET', KEYS[1], '~v', ARGV[2])
if tonumber(ARGV[3]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return added
"""

# KEYS: the hash. ARGV: the new version token, then the fields to delete (atomic, one slot).
# Returns how many it deleted (a field named twice, or deleted meanwhile by another replica,
# counts once or not at all); the version changes only then, and a hash gone (expired since
# the caller read it) is not made again, without a TTL.
FORGET_FACTS = """
local deleted = 0
for i = 2, #ARGV do deleted = deleted + redis.call('HDEL', KEYS[1], ARGV[i]) end
if deleted > 0 then redis.call('HSET', KEYS[1], '~v', ARGV[1]) end
return deleted
"""

Run = Callable[..., Awaitable[list[list[Any]]]]
"""The store's `_run`: batches of single-slot commands in, each batch's replies out."""

VERSION = "~v"
CACHED_OWNERS = 4096
"""Fact lists this process remembers (tenants, and sessions with facts of their own)."""


def add_args(lines: Sequence[str], *, max_lines: int, ttl_s: int) -> list[str | int]:
    """`ADD_FACTS`'s ARGV for `lines` (facts without a key are left out)."""
    args: list[str | int] = [max_lines, secrets.token_hex(8), ttl_s]
    for line in lines:
        key = fact_key(line)
        if key:
            args += [key, line]
    return args


def lines_of(fields: dict[str, str]) -> tuple[str, ...]:
    """A hash's fact lines in the order learned (its `~` fields left out), sanitised again (a
    value someone wrote with `redis-cli` is not trusted into a system prompt)."""
    facts = []
    for name, value in fields.items():
        seq, _, text = value.partition(" ")
        line = None if name.startswith("~") else clean_line(text)
        if line is not None:
            facts.append((int(seq) if seq.isdigit() else 0, line))
    return tuple(line for _, line in sorted(facts))


def doomed_fields(fields: dict[str, str], pattern: str) -> list[str]:
    """The fields of the facts `pattern` matches."""
    return [
        name
        for name, value in fields.items()
        if not name.startswith("~") and matches(value.partition(" ")[2], pattern)
    ]


class FactCache:
    """The fact lists read last, by key, with the version (`~v`) they were read at; the least
    recently used go past `CACHED_OWNERS`."""

    def __init__(self, size: int = CACHED_OWNERS) -> None:
        self._size = size
        self._entries: OrderedDict[str, tuple[str, tuple[str, ...]]] = OrderedDict()

    def get(self, key: str, version: Any) -> tuple[str, ...] | None:
        """The cached lines if read at `version`; () when there is no version (no facts)."""
        if version is None:
            self._entries.pop(key, None)
            return ()
        entry = self._entries.get(key)
        text = version.decode() if isinstance(version, bytes) else str(version)
        if entry is None or entry[0] != text:
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: str, fields: dict[str, str]) -> tuple[str, ...]:
        lines = lines_of(fields)
        self._entries[key] = (fields.get(VERSION, ""), lines)
        self._entries.move_to_end(key)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return lines


class RedisFacts:
    """The `FactStore` methods of the Redis store, on its keys and its `run` (the store's
    breaker around its wire: every call a batch in the hash's one slot). A tenant's facts
    outlive its sessions (kept until forgotten, bounded by `max_lines`); a session's own
    expire with its summaries, the session TTL after their last write."""

    def __init__(self, run: Run, keys: Keys, *, session_ttl_s: int) -> None:
        self._run = run
        self._keys = keys
        self._ttl = session_ttl_s
        self._cache = FactCache()

    def key(self, tenant: str, owner: str | None) -> str:
        return self._keys.memory(tenant, owner)

    async def current(self, key: str, version: Any) -> tuple[str, ...]:
        """The facts at `version` (`~v` as a request's load read it): from the cache, else read
        again (a round trip only when they changed); () when they cannot be read now (the
        request goes on without them)."""
        cached = self._cache.get(key, version)
        if cached is not None:
            return cached
        try:
            return await self._read(key)
        except StoreUnavailable:
            return ()

    async def _fields(self, key: str) -> dict[str, str]:
        [[fields]] = await self._run([("HGETALL", key)])
        return decode_hash(read_hash_reply(fields))

    async def _read(self, key: str) -> tuple[str, ...]:
        return self._cache.put(key, await self._fields(key))

    async def add(
        self, tenant: str, owner: str | None, lines: Sequence[str], *, max_lines: int
    ) -> int:
        key = self.key(tenant, owner)
        args = add_args(lines, max_lines=max_lines, ttl_s=0 if owner is None else self._ttl)
        if len(args) == 3:
            return 0
        [[added]] = await self._run([("EVAL", ADD_FACTS, 1, key, *args)])
        return int(added)

    async def read(self, tenant: str, owner: str | None) -> tuple[str, ...]:
        return await self._read(self.key(tenant, owner))

    async def forget(self, tenant: str, owner: str | None, pattern: str) -> int:
        key = self.key(tenant, owner)
        doomed = doomed_fields(await self._fields(key), pattern)
        if not doomed:
            return 0
        [[deleted]] = await self._run(
            [("EVAL", FORGET_FACTS, 1, key, secrets.token_hex(8), *doomed)]
        )
        return int(deleted)
