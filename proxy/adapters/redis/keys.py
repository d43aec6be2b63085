"""The Redis key layout (README "Sessions in Redis"); `P` is the configured prefix.

Every key sits in one cluster slot with the keys it is written or read with (a `{…}` hash
tag), so no command, pipeline or script of the store spans two slots:

- a session's keys: `P{t:s}:state|raw|snapshot|compactions|decisions|lock`;
- a persisted output: `P{t:ID}:output`, one slot per output (the id is the sha256 of the
  text), so a large tenant's outputs spread over the cluster and the id alone finds the key;
- `SHARDS` shards, each with its events stream `P{shard:N}:events`, a sorted set of sessions by
  last use per tenant `P{shard:N}:sessions:T` and the set of tenants seen `P{shard:N}:tenants`.
  A session's events and index entry go to shard `shard_of(t, s)`, with no single node taking
  every request's event write; readers merge the shards;
- learned facts: `P{t}:memory` (a tenant's, one slot) or `P{t:s}:memory` (a session's own);
- Responses records `P{t}:response:ID`, `P{t}:summary:ID`, and `Phandle_secret`: each read
  and written alone.

Tenant names are validated by the config and session ids sanitised by `proxy.identity`, so no
client input shapes a key.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

SHARDS = 8
"""Fixed: the shard of a session must not change while its keys live."""


def shard_of(tenant: str, session: str) -> int:
    """The shard holding a session's events and index entry (stable across processes)."""
    return zlib.crc32(f"{tenant}:{session}".encode()) % SHARDS


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str = "ctxproxy:"

    def session(self, tenant: str, session: str, kind: str) -> str:
        """`state`, `raw`, `snapshot`, `compactions`, `decisions` or `lock`."""
        return f"{self.prefix}{{{tenant}:{session}}}:{kind}"

    def output(self, tenant: str, output_id: str) -> str:
        return f"{self.prefix}{{{tenant}:{output_id}}}:output"

    def events(self, shard: int) -> str:
        return f"{self.prefix}{{shard:{shard}}}:events"

    def sessions(self, shard: int, tenant: str) -> str:
        """Sessions of `tenant` on `shard`, scored by the time of their last request."""
        return f"{self.prefix}{{shard:{shard}}}:sessions:{tenant}"

    def tenants(self, shard: int) -> str:
        """Tenants with a session on `shard`, so listings need no SCAN."""
        return f"{self.prefix}{{shard:{shard}}}:tenants"

    def legacy_output(self, tenant: str, output_id: str) -> str:
        """Where the layout before shards kept an output (`P{t}:output:ID`): still read, so
        an id in a history written then finds its text until the key's TTL."""
        return f"{self.prefix}{{{tenant}}}:output:{output_id}"

    def memory(self, tenant: str, owner: str | None) -> str:
        """Learned facts: the tenant's (`P{t}:memory`), or one session's (`P{t:s}:memory`)."""
        if owner is None:
            return f"{self.prefix}{{{tenant}}}:memory"
        return self.session(tenant, owner, "memory")

    def record(self, tenant: str, kind: str, record_id: str) -> str:
        """A Responses edge record (`P{t}:response:ID`, `P{t}:summary:ID`); `record_id` is safe
        (`proxy.identity.safe_id`, or one of ours)."""
        return f"{self.prefix}{{{tenant}}}:{kind}:{record_id}"

    def handle_secret(self) -> str:
        """The secret signing compaction handles, shared by every replica."""
        return f"{self.prefix}handle_secret"
