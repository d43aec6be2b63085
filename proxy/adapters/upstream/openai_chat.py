"""An OpenAI-compatible upstream: the body goes as is; the answer comes back as bytes, through the
one upstream transport (`proxy.adapters.upstream.transport`). A chat-completions body goes to
`/chat/completions` (`send_chat`), a Responses body to `/responses` (`send_responses`, for an
upstream with `api = "responses"`)."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from proxy.adapters.upstream.headers import upstream_request_headers
from proxy.adapters.upstream.transport import Timeouts, post_json, streamed_reply, whole_reply
from proxy.ports import UpstreamReply
from proxy.types import JSON


class OpenAIUpstream:
    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        base_url: str,
        api_key: str | None,
        timeouts: Timeouts,
        via: str | None = None,
    ) -> None:
        """`via`: this proxy's instance id, sent in the loop marker (`http_headers.VIA`)."""
        self._session = session
        self._via = via
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._responses_url = base_url.rstrip("/") + "/responses"
        self._api_key = api_key
        self._timeouts = timeouts

    async def send_chat(
        self,
        body: JSON,
        *,
        headers: Mapping[str, str],
        api_key: str | None,
        previous_id: str | None = None,
    ) -> UpstreamReply:
        """`previous_id` is ignored: chat completions have no cache-miss diagnostics."""
        return await self._send(self._url, body, headers=headers, api_key=api_key)

    async def send_responses(
        self, body: JSON, *, headers: Mapping[str, str], api_key: str | None
    ) -> UpstreamReply:
        """A Responses API body to `/responses`; a stream comes back as its own events."""
        return await self._send(self._responses_url, body, headers=headers, api_key=api_key)

    async def _send(
        self, url: str, body: JSON, *, headers: Mapping[str, str], api_key: str | None
    ) -> UpstreamReply:
        out = upstream_request_headers(headers, rebuilt_body=True, via=self._via)
        out["Content-Type"] = "application/json"
        key = api_key or self._api_key
        if key:
            out["Authorization"] = f"Bearer {key}"
        response, sent = await post_json(
            self._session,
            url,
            body,
            headers=out,
            timeouts=self._timeouts,
            stream=bool(body.get("stream")),
        )
        events = "text/event-stream" in response.headers.get("Content-Type", "")
        if response.status == 200 and events:
            return streamed_reply(response, idle_s=self._timeouts.idle_s, sent_bytes=sent)
        return await whole_reply(response, sent_bytes=sent)
