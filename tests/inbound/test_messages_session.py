"""The session a Messages client names: headers first, then Claude Code's `metadata.user_id`."""

from __future__ import annotations

import pytest

from proxy.inbound.messages_session import claude_code_session, messages_session_id
from tests.inbound.builders import fixture

SESSION = "5b1f0c2e-8a47-4d3b-9e61-2f7c4a9d0b13"


@pytest.mark.parametrize(
    ("user_id", "session"),
    [
        ('{"device_id":"3f3f","account_uuid":"","session_id":"' + SESSION + '"}', SESSION),
        ("user_" + "ab" * 32 + "_account__session_" + SESSION, SESSION),
        ("user_" + "ab" * 32 + "_account_7d2e1c44-0b9a-4f3e_session_" + SESSION, SESSION),
        ('{"device_id":"3f3f"}', None),
        ("{not json", None),
        ("alice", None),
    ],
)
def test_claude_codes_user_id_names_its_session(user_id: str, session: str | None) -> None:
    assert claude_code_session(user_id) == session


@pytest.mark.parametrize("name", ["main_turn_thinking", "topic_prefill", "legacy_images"])
def test_recorded_requests_name_their_session(name: str) -> None:
    recorded = fixture(name)
    headers = {k: v for k, v in recorded["headers"].items() if k != "x-claude-code-session-id"}
    assert messages_session_id(headers, recorded["body"]) == SESSION
    assert messages_session_id(recorded["headers"], recorded["body"]) == SESSION


def test_the_header_wins_and_other_user_ids_are_used_as_ids() -> None:
    body = {"metadata": {"user_id": "alice"}}
    assert messages_session_id({"x-claude-code-session-id": "s-1"}, body) == "s-1"
    assert messages_session_id({"x-ctx-session": "mine"}, body) == "mine"
    assert messages_session_id({}, body) == "alice"
    assert messages_session_id({}, {"metadata": {"session_id": "m-2"}}) == "m-2"
    assert messages_session_id({}, {"metadata": {"user_id": "a b/c"}}).startswith("h-")  # type: ignore[union-attr]
    assert messages_session_id({}, {}) is None
    assert messages_session_id({}, {"metadata": "junk"}) is None
