"""`Summarizer` adapters: one non-streaming completion through the official SDKs.

Each takes an OpenAI-format chat-completions body (from `proxy.compaction.stored`) and returns
the text of the answer with the call's usage, in the chat-completions shape: through
`/chat/completions`, through `/responses` (an upstream with `api = "responses"`: the body
rendered as a Responses request) or through the Messages API (translated both ways). Clients are
built explicitly (no environment reads) and never retry: a failed summary is the compactor's to
handle (it forwards the request uncompacted). The key is the client's forwarded key when given,
else the configured one. `via` (this proxy's instance id) is sent as the loop marker, as on
every upstream request (`proxy.adapters.upstream.headers`).

The SDKs (with pydantic, several thousand modules and ~90 MiB) are imported when the first
summary is asked for, not when the proxy starts: most requests never compact. The import (about
a second) runs in a worker thread, so the event loop goes on serving meanwhile.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import importlib
from typing import TYPE_CHECKING, Any

from proxy.adapters.upstream.headers import VIA
from proxy.inbound.responses_render import internal_to_responses
from proxy.inbound.responses_request import responses_to_internal
from proxy.inbound.responses_usage import chat_usage as chat_usage_of_responses
from proxy.ports import Completion
from proxy.translate.anthropic_request import to_messages_request
from proxy.translate.anthropic_response import chat_usage
from proxy.types import JSON

if TYPE_CHECKING:
    import anthropic
    import openai

# Like the upstream session, summarizer clients ignore HTTP(S)_PROXY: they talk to the same
# upstream. The SDKs refuse to build a client without a key; with none configured, the client's
# forwarded key is used per call, and without that the call fails (compaction fails open).
NO_KEY = "no-key-configured"


class OpenAISummarizer:
    """Summarizes through any OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(
        self,
        *,
        client: openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        via: str | None = None,
    ) -> None:
        self._client = client
        self._base_url, self._api_key, self._timeout_s = base_url, api_key or NO_KEY, timeout_s
        self._headers = {VIA: via} if via else None

    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            import openai  # on the first summary (module doc)

            self._client = openai.AsyncOpenAI(
                base_url=self._base_url,
                api_key=self._api_key,
                timeout=self._timeout_s,
                max_retries=0,
                default_headers=self._headers,
                http_client=openai.DefaultAsyncHttpxClient(trust_env=False, cookies=_no_cookies()),
            )
        return self._client

    async def keyed_client(self, api_key: str | None) -> openai.AsyncOpenAI:
        """The client, with `api_key` when given (the SDK loaded first, off the event loop)."""
        if self._client is None:
            await _load("openai")
        client = self.client()
        if api_key and api_key != client.api_key:
            client = client.with_options(api_key=api_key)
        return client

    async def complete(self, body: JSON, *, api_key: str | None) -> Completion:
        """The assistant text of one non-streaming completion of `body` ("" if none)."""
        client = await self.keyed_client(api_key)
        extra = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
        response = await client.chat.completions.create(
            model=body["model"], messages=body["messages"], extra_body=extra
        )
        usage = response.usage.model_dump(exclude_none=True) if response.usage else None
        if not response.choices:
            return Completion("", usage)
        return Completion(response.choices[0].message.content or "", usage)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


class OpenAIResponsesSummarizer(OpenAISummarizer):
    """Summarizes through an OpenAI-compatible `/responses` endpoint, for an upstream with
    `api = "responses"` (a server may speak only that API): the chat body is rendered as a
    Responses request (`proxy.inbound.responses_render`, nothing carried from a client), sent
    with `store: false` (the summary is kept by ctxproxy, not by the provider)."""

    async def complete(self, body: JSON, *, api_key: str | None) -> Completion:
        """The output text of one non-streaming Response to `body` ("" if none)."""
        client = await self.keyed_client(api_key)
        chat = {k: v for k, v in body.items() if k != "max_tokens"}
        if "max_tokens" in body:  # the older name, which the Responses API spells one way
            chat.setdefault("max_completion_tokens", body["max_tokens"])
        _, empty = responses_to_internal({})
        request = internal_to_responses({**chat, "stream": False}, empty)
        extra = {k: v for k, v in request.items() if k not in ("model", "input", "stream")}
        response = await client.responses.create(
            model=request["model"], input=request["input"], extra_body={"store": False, **extra}
        )
        usage = response.usage.model_dump(exclude_none=True) if response.usage else None
        return Completion(response.output_text, chat_usage_of_responses(usage) if usage else None)


class AnthropicSummarizer:
    """Summarizes through the Anthropic Messages API, translating the body first."""

    def __init__(
        self,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        via: str | None = None,
    ) -> None:
        self._client = client
        self._base_url, self._api_key, self._timeout_s = base_url, api_key or NO_KEY, timeout_s
        self._headers = {VIA: via} if via else None

    def client(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            import anthropic  # on the first summary (module doc)

            self._client = anthropic.AsyncAnthropic(
                base_url=self._base_url,
                api_key=self._api_key,
                timeout=self._timeout_s,
                max_retries=0,
                default_headers=self._headers,
                http_client=anthropic.DefaultAsyncHttpxClient(
                    trust_env=False, cookies=_no_cookies()
                ),
            )
        return self._client

    async def complete(self, body: JSON, *, api_key: str | None) -> Completion:
        """The text blocks of one non-streaming Messages answer to `body`, joined ("" if none)."""
        if self._client is None:
            await _load("anthropic")
        import anthropic  # loaded by now

        client = self.client()
        key = api_key or client.api_key or ""
        # The Messages API's documented credential header (the SDK would send a bearer token).
        headers: dict[str, str | anthropic.Omit] = {
            "X-Api-Key": key,
            "Authorization": anthropic.omit,
        }
        request: dict[str, Any] = {**to_messages_request(body), "stream": False}
        message = await client.messages.create(**request, extra_headers=headers)
        text = "".join(block.text for block in message.content if block.type == "text")
        return Completion(text, chat_usage(message.usage.model_dump(exclude_none=True)))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


def _no_cookies() -> http.cookiejar.CookieJar:
    """A jar that keeps nothing: one client serves every tenant of an upstream, so a cookie set
    in one tenant's summary must never go out with another's."""
    return http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


async def _load(sdk: str) -> None:
    """Import an SDK in a worker thread (a second of imports the event loop need not wait on)."""
    await asyncio.to_thread(importlib.import_module, sdk)
