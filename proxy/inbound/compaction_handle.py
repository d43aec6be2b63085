"""The handle in a compaction item's `encrypted_content`: signed by ctxproxy, read only by it
(pure).

A Responses client that asks for a compaction (Codex, the Agents SDK) gets one `compaction` item
back and sends it again at the head of its later requests; its `encrypted_content` is all the
proxy needs to find the summary it stands for. The handle is not the summary: it points to one
stored server-side, and says for whom and until when:

    ctxc1.<payload>.<mac>        payload: base64url of compact JSON
                                     {"p": prefix hash, "s": summary id, "e": expiry (unix s),
                                      "t": tenant tag}
                                 mac: base64url of HMAC-SHA256(secret, "ctxc1." + payload)

The tenant tag is HMAC-SHA256(secret, "tenant:" + tenant), cut to 16 bytes: it binds the handle
to its tenant without naming the tenant. The prefix hash is the chained hash of exactly the
conversation the summary covers (`proxy.history`), so a handle cannot be pointed at another
summary. `open_handle` checks, in this order, and refuses with the reason:

    not a handle of this form, not canonical base64url, bad JSON   → "malformed …"
    the MAC differs (constant-time compare)                        → "signature …" (forged,
                                                                     tampered, or another
                                                                     server's secret)
    the tenant tag differs                                         → "… another tenant"
    now ≥ expiry                                                   → "expired …"
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any, TypeGuard

PREFIX = "ctxc1."
TAG_BYTES = 16
MIN_SECRET_BYTES = 16


@dataclass(frozen=True, slots=True)
class Handle:
    """An opened handle: the summary it points to and the prefix that summary covers."""

    prefix_hash: str
    summary_id: str
    expires_at: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a handle was refused (the message of the 400 the client gets)."""

    reason: str


def is_handle(value: Any) -> TypeGuard[str]:
    """Whether `value` has the form of a ctxproxy handle (it may still be refused)."""
    return isinstance(value, str) and value.startswith(PREFIX)


def sign_handle(
    *, secret: bytes, tenant: str, prefix_hash: str, summary_id: str, expires_at: float
) -> str:
    """A handle for `tenant` pointing to summary `summary_id`, which covers the conversation
    prefix `prefix_hash`, valid until `expires_at` (unix seconds)."""
    _check_secret(secret)
    claims = {"p": prefix_hash, "s": summary_id, "e": int(expires_at), "t": _tag(secret, tenant)}
    payload = _encode(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    return f"{PREFIX}{payload}.{_encode(_mac(secret, payload))}"


def open_handle(token: Any, *, secret: bytes, tenant: str, now: float) -> Handle | Refusal:
    """The handle in `token` if it is genuine, `tenant`'s and unexpired, else the refusal."""
    _check_secret(secret)
    if not is_handle(token):
        return Refusal("malformed compaction handle: not one ctxproxy issued")
    fields = token[len(PREFIX) :].split(".")
    if len(fields) != 2:
        return Refusal("malformed compaction handle: expected a payload and a signature")
    payload, signature = fields
    raw_signature, raw_payload = _decode(signature), _decode(payload)
    if raw_signature is None or raw_payload is None:
        return Refusal("malformed compaction handle: not base64url")
    if not hmac.compare_digest(raw_signature, _mac(secret, payload)):
        return Refusal("compaction handle signature does not match: forged or tampered")
    claims = _claims(raw_payload)
    if claims is None:
        return Refusal("malformed compaction handle: bad claims")
    if not hmac.compare_digest(claims["t"].encode(), _tag(secret, tenant).encode()):
        return Refusal("compaction handle was issued to another tenant")
    if now >= claims["e"]:
        return Refusal("compaction handle expired: compact the conversation again")
    return Handle(prefix_hash=claims["p"], summary_id=claims["s"], expires_at=claims["e"])


def _check_secret(secret: bytes) -> None:
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"the handle secret must be at least {MIN_SECRET_BYTES} bytes")


def _mac(secret: bytes, payload: str) -> bytes:
    return hmac.new(secret, (PREFIX + payload).encode(), hashlib.sha256).digest()


def _tag(secret: bytes, tenant: str) -> str:
    digest = hmac.new(secret, b"tenant:" + tenant.encode(), hashlib.sha256).digest()
    return _encode(digest[:TAG_BYTES])


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _decode(text: str) -> bytes | None:
    """The bytes of canonical unpadded base64url `text`; None for anything else (so that no
    two spellings of one handle exist)."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if _encode(raw) == text else None


def _claims(raw: bytes) -> dict[str, Any] | None:
    try:
        claims = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(claims, dict):
        return None
    types = {"p": str, "s": str, "e": int, "t": str}
    if set(claims) != set(types) or any(type(claims[k]) is not t for k, t in types.items()):
        return None
    return claims
