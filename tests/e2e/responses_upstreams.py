"""The proxy in front of each upstream kind a Responses client may meet, behind one interface:
`chat` (the fake OpenAI API, translated to chat completions), `responses` (the same fake with
`api = "responses"`: sent natively) and `anthropic` (the fake Messages API). Each scripts text or
tool calls, lists what reached the upstream, and checks it the way that upstream would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import openai

from benchmarks.validity import problems
from tests.e2e.conftest import AnthropicProxy, MakeAnthropicProxy
from tests.fakes import anthropic_rules
from tests.fakes import anthropic_upstream as claude
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.inbound.responses_builders import pairing_problem, wire_problem
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy

JSON = dict[str, Any]
KINDS = ("chat", "responses", "anthropic")
SUMMARY = "<analysis>read it</analysis><summary>SUMMARY OF EARLIER TURNS</summary>"


@dataclass
class Upstream:
    kind: str
    proxy: Proxy | AnthropicProxy

    @property
    def _claude(self) -> FakeAnthropic:
        fake = self.proxy.fake
        assert isinstance(fake, FakeAnthropic)
        return fake

    @property
    def _openai(self) -> FakeOpenAI:
        fake = self.proxy.fake
        assert isinstance(fake, FakeOpenAI)
        return fake

    def client(self, **kw: Any) -> openai.AsyncOpenAI:
        return self.proxy.client(**kw)

    def say(self, text: str, *, prompt_tokens: int | None = None) -> None:
        if self.kind == "anthropic":
            usage = {"input_tokens": prompt_tokens or 12, "output_tokens": 5}
            self._claude.script(claude.text(text, usage=usage))
        else:
            self._openai.script.append(Reply(content=text, prompt_tokens=prompt_tokens))

    def call(self, *calls: tuple[str, str, JSON]) -> None:
        """Tool calls, each (call id, name, arguments)."""
        if self.kind == "anthropic":
            self._claude.script(claude.tool_use(*calls))
            return
        chat = [{"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, n, a in calls]  # fmt: skip
        self._openai.script.append(Reply(tool_calls=chat))

    def summarizes(self) -> None:
        """The next summarizer call answers `SUMMARY` (the OpenAI fake always does)."""
        if self.kind == "anthropic":
            self._claude.script(claude.text(SUMMARY))

    @property
    def requests(self) -> list[JSON]:
        """The bodies of the model requests that reached the upstream (summaries left out)."""
        if self.kind == "anthropic":
            return [r.body for r in self._claude.received if not _is_summary(r.body)]
        path = "/v1/responses" if self.kind == "responses" else "/v1/chat/completions"
        return [r.body for r in self._openai.chat if r.path == path]

    def text_sent(self, body: JSON) -> str:
        """Everything the upstream was told in `body`, as one string."""
        return json.dumps(body, ensure_ascii=False)

    def problem(self, body: JSON) -> str | None:
        """What that upstream would reject in `body`."""
        if self.kind == "responses":
            if body.get("previous_response_id"):  # pairing spans the stored response
                return wire_problem({**body, "input": []})
            return wire_problem(body)
        if self.kind == "anthropic":
            return anthropic_rules.request_problem(body)
        found = problems(body)
        return found[0] if found else None


def _is_summary(body: JSON) -> bool:
    """The proxy's summarizer request (to the Messages API)."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    return "Summarize the conversation " in text and "<summary>" in text


async def make_upstream(
    kind: str, make_proxy: MakeProxy, make_anthropic_proxy: MakeAnthropicProxy, **values: Any
) -> Upstream:
    if kind == "anthropic":
        return Upstream(kind, await make_anthropic_proxy(**values))
    if kind == "responses":
        values["upstream_extra"] = 'api = "responses"\n' + values.get("upstream_extra", "")
    proxy = await make_proxy(**values)
    proxy.fake.summary_text = SUMMARY
    return Upstream(kind, proxy)


__all__ = ["KINDS", "SUMMARY", "Upstream", "make_upstream", "pairing_problem"]
