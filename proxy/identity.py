"""Who is asking and which session a request belongs to (DESIGN §4). Pure.

Session id, first present: `X-Ctx-Session`; the client's own session header
(`X-Claude-Code-Session-Id`, `X-Session-Id`); the body's `prompt_cache_key`, `user` or
`metadata.session_id`; else derived from the tenant, the client's system message(s) and the first
user message. A client-supplied id is used as is only if it is at most 128 characters of
`[A-Za-z0-9._:-]`; any other is replaced by its hash, so no client input shapes a key or a path.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.history import message_digest, system_digest
from proxy.types import Message

SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
SESSION_HEADERS = ("x-ctx-session", "x-claude-code-session-id", "x-session-id")


def safe_id(value: str) -> str:
    """`value` if it is a safe id, else a stable hash of it. Dots-only ids are hashed too."""
    if SAFE_ID.match(value) and value.strip(".") != "":
        return value
    return "h-" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def explicit_session_id(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """The session id the client named (made safe), or None: then it is derived."""
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if value:
            return safe_id(value)
    for value in (body.get("prompt_cache_key"), body.get("user"), _metadata_session(body)):
        if isinstance(value, str) and value:
            return safe_id(value)
    return None


def _metadata_session(body: Mapping[str, Any]) -> Any:
    metadata = body.get("metadata")
    return metadata.get("session_id") if isinstance(metadata, Mapping) else None


def derived_session_id(
    tenant: str, client_system: Sequence[Message], history: Sequence[Message]
) -> str:
    """A stable id from the tenant, the system messages and the first user message."""
    return derived_id(tenant, system_digest(client_system), first_user_digest(history))


def first_user_digest(history: Sequence[Message]) -> bytes:
    """The canonical JSON of the first user message, `b"null"` when there is none."""
    for message in history:  # a loop: cheaper than next() over a generator
        if message.get("role") == "user":
            return message_digest(message)
    return b"null"


def derived_id(tenant: str, system: bytes, user: bytes) -> str:
    """`derived_session_id` from the canonical JSON of the system messages and of the first user
    message (`proxy.history.message_digest`; `b"null"` when there is none)."""
    return "d-" + hashlib.sha256(tenant.encode() + system + user).hexdigest()[:32]
