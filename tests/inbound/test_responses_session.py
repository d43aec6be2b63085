"""The session a Responses client names: the generic headers, Codex's, then the body."""

from __future__ import annotations

from proxy.inbound.responses_session import responses_session_id


def test_the_generic_session_header_wins() -> None:
    headers = {"x-ctx-session": "mine", "session_id": "codex-thread"}
    assert responses_session_id(headers, {"prompt_cache_key": "k"}) == "mine"


def test_codexs_headers_name_the_thread_before_the_body() -> None:
    thread = "019a9544-7ab1-73c1-837e-1fa681f4462b"
    assert responses_session_id({"thread-id": thread, "session-id": "root"}, {}) == thread
    assert responses_session_id({"session_id": thread, "conversation_id": thread}, {}) == thread
    assert responses_session_id({"x-codex-window-id": f"{thread}:3"}, {}) == thread
    assert responses_session_id({"session_id": thread}, {"prompt_cache_key": "other"}) == thread


def test_then_the_body_then_nothing() -> None:
    assert responses_session_id({}, {"prompt_cache_key": "pk", "user": "u"}) == "pk"
    assert responses_session_id({}, {"metadata": {"session_id": "m"}}) == "m"
    assert responses_session_id({}, {}) is None
    unsafe = responses_session_id({"session_id": "a/b c"}, {})
    assert unsafe is not None and unsafe.startswith("h-")
