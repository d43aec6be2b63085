"""`Summarizer` adapters: one non-streaming completion through the official SDKs.

Both take an OpenAI-format chat-completions body (from `proxy.stages.compact`) and return the
text of the answer. Clients are built explicitly (no environment reads) and never retry: a
failed summary is the compactor's to handle (it forwards the request uncompacted). The key is
the client's forwarded key when given, else the configured one.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from proxy.translate.anthropic_request import to_messages_request
from proxy.types import JSON

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
    ) -> None:
        self._client = client or openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY,
            timeout=timeout_s,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
        )

    async def complete(self, body: JSON, *, api_key: str | None) -> str:
        """The assistant text of one non-streaming completion of `body` ("" if none)."""
        client = self._client
        if api_key and api_key != client.api_key:
            client = client.with_options(api_key=api_key)
        extra = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
        response = await client.chat.completions.create(
            model=body["model"], messages=body["messages"], extra_body=extra
        )
        if not response.choices:
            return ""
        return response.choices[0].message.content or ""

    async def close(self) -> None:
        await self._client.close()


class AnthropicSummarizer:
    """Summarizes through the Anthropic Messages API, translating the body first."""

    def __init__(
        self,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self._client = client or anthropic.AsyncAnthropic(
            base_url=base_url,
            api_key=api_key or NO_KEY,
            timeout=timeout_s,
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(trust_env=False),
        )

    async def complete(self, body: JSON, *, api_key: str | None) -> str:
        """The text blocks of one non-streaming Messages answer to `body`, joined ("" if none)."""
        key = api_key or self._client.api_key or ""
        # The Messages API's documented credential header (the SDK would send a bearer token).
        headers: dict[str, str | anthropic.Omit] = {
            "X-Api-Key": key,
            "Authorization": anthropic.omit,
        }
        request: dict[str, Any] = {**to_messages_request(body), "stream": False}
        message = await self._client.messages.create(**request, extra_headers=headers)
        return "".join(block.text for block in message.content if block.type == "text")

    async def close(self) -> None:
        await self._client.close()
