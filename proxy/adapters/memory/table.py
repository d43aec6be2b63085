"""The embedded store's sessions by tenant and session id, each living the session TTL after its
last write: an expired session is dropped when touched, and the ones nobody touches again are
swept out at most once per `SWEEP_EVERY_S` (a long-running process must not keep them all).
"""

from __future__ import annotations

from proxy.adapters.memory.session import SessionEntry

SWEEP_EVERY_S = 60.0
"""How often, at most, expired sessions nobody touches again are looked for and dropped."""


class SessionTable:
    def __init__(self, *, ttl_s: float, now: float) -> None:
        self.entries: dict[tuple[str, str], SessionEntry] = {}
        """Every session held, expired ones not yet dropped included (read-only outside)."""
        self._ttl_s = ttl_s
        self._swept_at = now

    def live(self, tenant: str, session: str, *, now: float, create: bool) -> SessionEntry | None:
        """The unexpired session, or None; with `create`, a new one if needed, and either way
        its TTL renewed from `now`."""
        key = (tenant, session)
        entry = self.entries.get(key)
        if entry is not None and entry.expires_at <= now:
            del self.entries[key]
            entry = None
        if not create:
            return entry
        if entry is None:
            self._sweep(now)
            entry = self.entries[key] = SessionEntry()
        entry.expires_at = now + self._ttl_s
        return entry

    def _sweep(self, now: float) -> None:
        if now - self._swept_at < SWEEP_EVERY_S:
            return
        self._swept_at = now
        for key in [key for key, entry in self.entries.items() if entry.expires_at <= now]:
            del self.entries[key]
