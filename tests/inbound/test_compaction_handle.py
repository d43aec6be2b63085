"""Compaction handles: only a genuine, unexpired handle of the same tenant opens; 1,000 generated
forgeries, tamperings, other tenants' and other servers' handles: none accepted."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.inbound.compaction_handle import (
    PREFIX,
    Handle,
    Refusal,
    is_handle,
    open_handle,
    sign_handle,
)

SECRET = b"0123456789abcdef0123456789abcdef"
NOW = 1_700_000_000.0


def signed(tenant: str = "acme", *, secret: bytes = SECRET, expires_at: float = NOW + 3600) -> str:
    return sign_handle(
        secret=secret, tenant=tenant, prefix_hash="9f2c", summary_id="sum-1", expires_at=expires_at
    )


def test_a_genuine_handle_opens_to_its_summary_and_prefix() -> None:
    token = signed()
    assert is_handle(token) and token.startswith(PREFIX)
    opened = open_handle(token, secret=SECRET, tenant="acme", now=NOW)
    assert opened == Handle(prefix_hash="9f2c", summary_id="sum-1", expires_at=int(NOW + 3600))
    assert "acme" not in base64.urlsafe_b64decode(token.split(".")[1] + "==").decode()


@pytest.mark.parametrize(
    ("token", "tenant", "now", "reason"),
    [
        (signed(), "other", NOW, "another tenant"),
        (signed(expires_at=NOW), "acme", NOW, "expired"),
        (signed(secret=b"x" * 32), "acme", NOW, "signature does not match"),
        ("gAAAAABfernet", "acme", NOW, "not one ctxproxy issued"),
        (PREFIX + "abc", "acme", NOW, "a payload and a signature"),
        (PREFIX + "ab!.cd", "acme", NOW, "not base64url"),
    ],
)
def test_refusals_say_why(token: str, tenant: str, now: float, reason: str) -> None:
    refused = open_handle(token, secret=SECRET, tenant=tenant, now=now)
    assert isinstance(refused, Refusal) and reason in refused.reason


def test_a_payload_rewritten_and_resigned_without_the_secret_is_refused() -> None:
    payload = json.loads(base64.urlsafe_b64decode(signed().split(".")[1] + "=="))
    payload["s"] = "someone-elses-summary"
    raw = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    forged = f"{PREFIX}{raw}.{signed().split('.')[2]}"
    refused = open_handle(forged, secret=SECRET, tenant="acme", now=NOW)
    assert isinstance(refused, Refusal) and "forged or tampered" in refused.reason


def test_a_short_secret_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        sign_handle(secret=b"short", tenant="t", prefix_hash="p", summary_id="s", expires_at=1)


def _tampered(token: str, at: int, char: str) -> str:
    at = len(PREFIX) + at % (len(token) - len(PREFIX))
    return token[:at] + char + token[at + 1 :]


attacks = st.one_of(
    st.text(max_size=80).map(lambda t: PREFIX + t),  # forged from nothing
    st.text(max_size=120),  # anything at all
    st.tuples(st.integers(0, 10_000), st.sampled_from("AQgw-_=.xZ09")).map(
        lambda a: _tampered(signed(), *a)
    ),  # one character of a genuine handle changed
    st.text(alphabet="acmeXYZ", min_size=1, max_size=6)
    .filter(lambda t: t != "acme")
    .map(lambda t: signed(t)),  # another tenant's genuine handle
    st.binary(min_size=16, max_size=40)
    .filter(lambda s: s != SECRET)
    .map(lambda s: signed(secret=s)),  # another server's
    st.floats(NOW - 10**6, NOW).map(lambda e: signed(expires_at=e)),  # expired
)


@settings(
    max_examples=1000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(attacks)
def test_no_forged_tampered_foreign_or_expired_handle_is_accepted(token: str) -> None:
    if token == signed():
        return  # a substitution that put back the same character: the genuine handle
    opened = open_handle(token, secret=SECRET, tenant="acme", now=NOW)
    assert isinstance(opened, Refusal), token
