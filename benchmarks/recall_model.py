"""A scripted upstream that recalls what ctxproxy cut, for the recall benchmark (`recall.py`).

Before each client request the driver hands it the client's messages (`expect`): it then knows
every original. In the first round it reads the refs the cut markers name (`find_refs`), calls
`ctx_recall` for up to `per_round` cut items by ref and for as many distinctive lines of them by
query (items not tried before first), and checks the answers of the next round byte for byte:

    by ref    a tool result or a persisted output: the answer is its original text (a long one:
              the first page is the original's start and names the rest's offset); `turns:i-i`:
              the client's message i; a span `turns:a-b`: the transcript starts with message a
    by query  a line of a cut item that its cut text lost (20 to 200 characters, no other cut
              item holds it): the answer holds the whole line

Summarizer calls get a fixed summary. `prompt_tokens` = characters of `messages` + `tools` / 4.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from benchmarks.fake_llm import SUMMARY, is_summary_call, prompt_tokens
from proxy.content import content_text, find_refs, output_id
from proxy.recall.index import history_of, message_text
from proxy.recall.refs import parse_turns

JSON = dict[str, Any]
TOOL = "ctx_recall"


@dataclass
class Tally:
    ref_needles: int = 0
    ref_hits: int = 0
    ref_kinds: dict[str, int] = field(default_factory=dict)
    """Ref needles by what they name: result (a tool_call_id), output (an id), turns."""
    query_needles: int = 0
    query_hits: int = 0
    rounds: int = 0
    """Upstream chat calls (the client's requests and the extra rounds)."""
    offered: int = 0
    """Requests whose first round carried the recall tool."""
    misses: list[str] = field(default_factory=list)


@dataclass
class RecallModel:
    per_round: int = 2
    tally: Tally = field(default_factory=Tally)
    _history: list[JSON] = field(default_factory=list)
    _pending: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    """Recall call id → (kind, what was asked, the expected text)."""
    _tried: set[str] = field(default_factory=set)
    _history_ids: set[Any] = field(default_factory=set)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def expect(self, messages: list[JSON]) -> None:
        """The client's messages of the request about to be sent."""
        self._history = list(history_of(messages))
        self._history_ids = {m.get("tool_call_id") for m in self._history}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        if is_summary_call(body):
            return _answer(body, content=SUMMARY)
        self.tally.rounds += 1
        last = body["messages"][-1]
        if last.get("role") == "tool" and str(last.get("tool_call_id")).startswith("rc_"):
            self._check(body["messages"])
            return _answer(body, content="ok")
        if any(t.get("function", {}).get("name") == TOOL for t in body.get("tools") or []):
            self.tally.offered += 1
            calls = self._calls(body["messages"])
            if calls:
                return _answer(body, calls=calls)
        return _answer(body, content="ok")

    def _originals(self) -> dict[str, str]:
        """ref → original text of every tool result, by its id and by its output id."""
        found: dict[str, str] = {}
        ids = [m.get("tool_call_id") for m in self._history if m.get("role") == "tool"]
        for message in self._history:
            call_id = message.get("tool_call_id")
            if message.get("role") != "tool" or ids.count(call_id) != 1:
                continue  # an id several results answer is ambiguous: not a needle
            text = content_text(message.get("content"))
            found[str(call_id)] = text
            found[output_id(text)] = text
        return found

    def _calls(self, sent: list[JSON]) -> list[JSON]:
        originals = self._originals()
        cut: dict[str, str] = {}  # ref → the text the upstream received around it
        for message in sent:
            text = message_text(message)
            for ref in find_refs(text, tool_name=TOOL):
                cut.setdefault(ref, text)
        fresh = sorted(cut, key=lambda ref: ref in self._tried)
        calls: list[JSON] = []
        for ref in fresh[: self.per_round]:
            expected = self._expected(ref, originals)
            if expected is not None:
                calls.append(self._call("ref", ref, expected, {"ref": ref}))
        everything = "\x00".join(set(originals.values()))
        lines: list[str] = []
        for ref in (r for r in fresh if r in originals):
            lines += _distinctive(originals[ref], cut[ref], everything)
            if len(lines) >= self.per_round:
                break
        for line in lines[: self.per_round]:
            calls.append(self._call("query", line, line, {"query": line}))
        self._tried.update(fresh[: self.per_round])
        return calls

    def _expected(self, ref: str, originals: dict[str, str]) -> str | None:
        if ref in originals:
            return originals[ref]
        span = parse_turns(ref)
        if span is None or span[1] >= len(self._history):
            return None
        first = self._history[span[0]]
        if span[0] == span[1]:
            return message_text(first)
        head = f"[#{span[0]} {first.get('role', '')}]\n{message_text(first)}"
        return head[:2_000]  # a span: its transcript starts so (`RecallIndex.transcript`)

    def _call(self, kind: str, asked: str, expected: str, arguments: JSON) -> JSON:
        call_id = f"rc_{next(self._ids)}"
        self._pending[call_id] = (kind, asked, expected)
        if kind == "ref":
            self.tally.ref_needles += 1
            named = "turns" if asked.startswith("turns:") else "output"
            named = "result" if asked in self._history_ids else named
            self.tally.ref_kinds[named] = self.tally.ref_kinds.get(named, 0) + 1
        else:
            self.tally.query_needles += 1
        function = {"name": TOOL, "arguments": orjson.dumps(arguments).decode()}
        return {"id": call_id, "type": "function", "function": function}

    def _check(self, messages: list[JSON]) -> None:
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            kind, asked, expected = self._pending.pop(str(message["tool_call_id"]))
            answer = str(message.get("content"))
            hit = _page_matches(answer, expected) if kind == "ref" else expected in answer
            if kind == "ref":
                self.tally.ref_hits += hit
            else:
                self.tally.query_hits += hit
            if not hit and len(self.tally.misses) < 10:
                self.tally.misses.append(f"{kind} {asked[:60]!r}: {answer[:120]!r}")


def _page_matches(answer: str, expected: str) -> bool:
    """The answer is `expected` whole, or its first page (the note names where the rest is), or
    a span's transcript starting as expected."""
    if answer == expected or (expected.startswith("[#") and answer.startswith(expected)):
        return True  # a whole text, or a span's transcript starting with its first message
    body, _, note = answer.rpartition("\n[chars 0-")
    end = note.split(" ", 1)[0]
    return bool(body) and end.isdigit() and expected[: int(end)] == body


def _distinctive(original: str, cut: str, everything: str) -> list[str]:
    """One line of `original` that its cut text lost, 20 to 200 characters, found once in
    `everything` (all the originals): from the middle of the candidates, at most 40 looked at."""
    lines = [line.strip() for line in original.split("\n")]
    lines = [line for line in lines if 20 <= len(line) <= 200 and line not in cut]
    step = max(len(lines) // 40, 1)
    found = [line for line in lines[::step] if everything.count(line) == 1]
    return found[len(found) // 2 : len(found) // 2 + 1]


def _answer(body: JSON, *, content: str | None = None, calls: list[JSON] | None = None) -> Any:
    message: JSON = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    tokens = prompt_tokens(body)
    completion = {
        "id": "chatcmpl-recall", "object": "chat.completion", "created": 1,
        "model": body.get("model", "m"),
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5},
    }  # fmt: skip
    if not body.get("stream"):
        return web.json_response(completion)
    return web.Response(body=_stream(completion), content_type="text/event-stream")


def _stream(completion: JSON) -> bytes:
    """The completion as chunks: role and content, each call (head, then arguments), finish."""
    base = {k: completion[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]
    deltas: list[JSON] = [{"role": "assistant", "content": message["content"] or ""}]
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}  # fmt: skip
        deltas.append({"tool_calls": [head]})
        rest = {"index": index, "function": {"arguments": call["function"]["arguments"]}}
        deltas.append({"tool_calls": [rest]})
    events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
              for d in deltas]  # fmt: skip
    events.append(
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    )
    events.append({**base, "choices": [], "usage": completion["usage"]})
    out = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)
    return out + b"data: [DONE]\n\n"
