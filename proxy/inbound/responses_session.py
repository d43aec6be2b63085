"""The session id a Responses client names, if any (pure; DESIGN §4 with the Responses fields).

First present: the session headers of `proxy.identity` (`X-Ctx-Session`,
`X-Claude-Code-Session-Id`, `X-Session-Id`); then Codex's own headers, which name the
conversation thread it is running (one thread per agent; a sub-agent has its own):

    thread-id, thread_id                  the thread (Codex 0.1xx)
    session-id, session_id                the session (earlier Codex: the conversation)
    conversation_id                       the conversation (earlier Codex)
    x-codex-window-id                     `<thread>:<generation>`: the thread part

then the body's `prompt_cache_key` (Codex sets it to the thread id too), `user`,
`metadata.session_id`. None when the client names none: the caller derives one from the internal
form (`proxy.identity.derived_session_id`). Every id is made safe by `proxy.identity`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.identity import explicit_session_id, safe_id

CODEX_HEADERS = ("thread-id", "thread_id", "session-id", "session_id", "conversation_id")
WINDOW_HEADER = "x-codex-window-id"


def codex_session(headers: Mapping[str, str]) -> str | None:
    """The thread Codex's headers name (not yet made safe), or None."""
    for name in CODEX_HEADERS:
        value = headers.get(name)
        if value:
            return value
    window = headers.get(WINDOW_HEADER)
    return window.rsplit(":", 1)[0] if window and window.rsplit(":", 1)[0] else None


def responses_session_id(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """The session a Responses request names (made safe), or None; see the module docstring."""
    named = explicit_session_id(headers, {})
    if named is not None:
        return named
    codex = codex_session(headers)
    if codex is not None:
        return safe_id(codex)
    return explicit_session_id({}, body)
