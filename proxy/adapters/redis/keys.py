"""The Redis key layout of DESIGN §5; `P` is the configured prefix.

`{t:s}` is a hash tag of tenant and session so that one session's keys share a cluster slot.
Tenant names are validated by the config and session ids sanitised by `proxy.identity`, so no
client input shapes a key.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str = "ctxproxy:"

    def session(self, tenant: str, session: str, kind: str) -> str:
        """`state`, `raw`, `snapshot`, `compactions`, `decisions` or `lock`."""
        return f"{self.prefix}{{{tenant}:{session}}}:{kind}"

    def output(self, tenant: str, output_id: str) -> str:
        return f"{self.prefix}{{{tenant}}}:output:{output_id}"

    def memory(self, tenant: str, owner: str | None) -> str:
        """Learned facts: the tenant's (`P{t}:memory`), or one session's (`P{t:s}:memory`)."""
        if owner is None:
            return f"{self.prefix}{{{tenant}}}:memory"
        return self.session(tenant, owner, "memory")

    def sessions(self, tenant: str) -> str:
        return f"{self.prefix}{{{tenant}}}:sessions"

    def tenants(self) -> str:
        """A SET of tenants seen, so admin listings need no SCAN."""
        return f"{self.prefix}tenants"

    def events(self) -> str:
        return f"{self.prefix}events"
