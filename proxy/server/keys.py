"""Bearer tokens → tenants, by sha256 digest.

A tenant with `keys = []` is open: it takes any bearer (or none) that no keyed tenant claims; with
several open tenants the first in the config wins. Admin keys (`[server] admin_keys`) unlock the
cross-tenant routes. Tokens themselves are never stored, logged or echoed.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from proxy.errors import Unauthorized
from proxy.settings import TenantSettings

KNOWN_CALLERS = 1024


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "ctx-" + secrets.token_urlsafe(32)


def bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


@dataclass(frozen=True, slots=True)
class Caller:
    tenant: str
    token: str | None
    admin: bool = False


class KeyRing:
    def __init__(self, tenants: Mapping[str, TenantSettings], admin_keys: Sequence[str]) -> None:
        self._keyed = {d: name for name, t in tenants.items() for d in t.keys}
        self._open = next((name for name, t in tenants.items() if not t.keys), None)
        self._admin = frozenset(admin_keys)
        self._known: dict[str | None, Caller] = {}

    def identify(self, authorization: str | None) -> Caller:
        """The caller's tenant; `Unauthorized` for an unknown or missing bearer.

        Looked up by the token's sha256: the time a lookup takes tells nothing about a secret.
        Answers are remembered per `Authorization` value (a bounded, in-process map)."""
        known = self._known.get(authorization)
        if known is not None:
            return known
        caller = self._identify(authorization)
        if len(self._known) >= KNOWN_CALLERS:
            self._known.clear()
        self._known[authorization] = caller
        return caller

    def _identify(self, authorization: str | None) -> Caller:
        token = bearer(authorization)
        if token is not None:
            hashed = digest(token)
            found = self._keyed.get(hashed)
            admin = hashed in self._admin
            if found is not None:
                return Caller(found, token, admin)
            if admin:
                return Caller(self._open or "", token, True)
        if self._open is None:
            raise Unauthorized("Invalid or missing API key for this proxy.")
        return Caller(self._open, token)
