"""How learned facts are configured (`MemorySettings`) and kept (`FactLedger`). Pure.

A ledger holds fact lines oldest first, one per normalised text (`proxy.memory.fact.fact_key`),
at most `max_lines`: adding past the cap drops the oldest. The embedded store keeps one per
tenant (or session); the Redis store keeps the same rules in a Lua script over one hash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from proxy.errors import InvalidSetting
from proxy.memory.fact import fact_key, matches

Scope = Literal["tenant", "session"]


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """`[tenants.NAME.memory]`: whether compactions learn facts, whose they are (`tenant`: shared
    by all the tenant's sessions; `session`: the session's own), and how many are kept."""

    enabled: bool = True
    scope: Scope = "tenant"
    max_lines: int = 200

    def __post_init__(self) -> None:
        if self.max_lines < 1:
            raise InvalidSetting("max_lines", "must be at least 1")
        if self.scope not in ("tenant", "session"):
            raise InvalidSetting("scope", 'must be "tenant" or "session"')

    def owner(self, session: str) -> str | None:
        """The session whose facts a request of `session` sees; None: the tenant's."""
        return session if self.scope == "session" else None


class FactLedger:
    """Fact lines in the order they were learned, once per normalised text, capped on `add`.

    `lines` is one tuple until the ledger changes (the bootstrap's cache compares it by
    identity first)."""

    __slots__ = ("_facts", "lines")

    def __init__(self, lines: Iterable[str] = ()) -> None:
        self._facts: dict[str, str] = {}
        for line in lines:
            self._facts.setdefault(fact_key(line), line)
        self._facts.pop("", None)
        self.lines: tuple[str, ...] = tuple(self._facts.values())

    def copy(self) -> FactLedger:
        """A ledger holding the same lines (the same tuple), changed apart from this one."""
        twin = FactLedger()
        twin._facts = dict(self._facts)
        twin.lines = self.lines
        return twin

    def add(self, lines: Iterable[str], *, max_lines: int) -> int:
        """Append the lines whose text is new, then drop the oldest past `max_lines`; how many
        were appended (a line dropped at once by the cap counts)."""
        added = 0
        for line in lines:
            key = fact_key(line)
            if key and key not in self._facts:
                self._facts[key] = line
                added += 1
        dropped = list(self._facts)[: max(0, len(self._facts) - max_lines)]
        for key in dropped:
            del self._facts[key]
        if added or dropped:
            self.lines = tuple(self._facts.values())
        return added

    def forget(self, pattern: str) -> int:
        """Remove the facts `pattern` matches (`proxy.memory.fact.matches`); how many."""
        doomed = [key for key, line in self._facts.items() if matches(line, pattern)]
        for key in doomed:
            del self._facts[key]
        if doomed:
            self.lines = tuple(self._facts.values())
        return len(doomed)
