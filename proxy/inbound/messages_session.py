"""The session id a Messages client names, if any (pure; DESIGN §4 with the Messages fields).

First present: the session headers of `proxy.identity` (`X-Ctx-Session`, Claude Code's
`X-Claude-Code-Session-Id`, `X-Session-Id`); then `metadata.user_id`, Anthropic's field for the
end user, read as `proxy.identity` reads a chat body's `user`, except that Claude Code's own
values name their session and it is that session id which is used:

    JSON object as a string (Claude Code 2.1.78 and later)  {"device_id": …, "account_uuid": …,
                                                            "session_id": "<uuid>"}
    the earlier form                                        user_<hex>_account_<uuid or
                                                            empty>_session_<uuid>

then `metadata.session_id`. None when the client names none: the caller derives one from the
internal form (`proxy.identity.derived_session_id`). Every id is made safe by `proxy.identity`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from proxy.identity import explicit_session_id

LEGACY_USER_ID = re.compile(r"^user_[0-9A-Za-z]*_account_[0-9A-Za-z-]*_session_([0-9A-Za-z-]+)$")


def claude_code_session(user_id: str) -> str | None:
    """The session id inside a Claude Code `metadata.user_id`, or None for any other value."""
    if user_id.startswith("{"):
        try:
            parsed = json.loads(user_id)
        except ValueError:
            return None
        session = parsed.get("session_id") if isinstance(parsed, dict) else None
        return session if isinstance(session, str) and session else None
    found = LEGACY_USER_ID.match(user_id)
    return found.group(1) if found else None


def messages_session_id(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """The session a Messages request names (made safe), or None; see the module docstring."""
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    user_id = metadata.get("user_id")
    if isinstance(user_id, str) and user_id:
        user_id = claude_code_session(user_id) or user_id
    return explicit_session_id(headers, {"user": user_id, "metadata": metadata})
