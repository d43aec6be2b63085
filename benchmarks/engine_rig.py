"""ctxproxy's `ContextEngine` built in process, without HTTP, for the pipeline benchmarks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import targets
from benchmarks.payloads import MODEL, load_trace
from proxy.adapters.memory.store import MemoryStore
from proxy.compaction.compactor import Compactor
from proxy.config import load_settings
from proxy.engine.engine import ContextEngine
from proxy.engine.pipeline import build_stack, draft_from_body
from proxy.ports import StateStore
from proxy.server.factories import make_workspace
from proxy.usage import Usage

HISTORY_TRACE = "claudecode-spotter__fa812bfe-seg1.json"


def make_engine(tmp: Path, store: StateStore | None = None) -> ContextEngine:
    """The default tenant's engine (memory store unless given), compaction never triggering."""
    config = targets.ctxproxy_config(tmp, "http://127.0.0.1:9/v1", 9)
    settings = load_settings(config, environ={"BENCH_UPSTREAM_KEY": "sk-fake"})
    tenant = settings.tenants["default"]
    store = store or MemoryStore()
    return ContextEngine(
        sessions=store,
        outputs=store,
        workspace=make_workspace(settings),
        compactor=Compactor(store=store, summarizers={}),
        stacks={"default": build_stack(tenant, settings.upstreams[tenant.upstream])},
        upstreams=settings.upstreams,
    )


def cycled_messages(count: int) -> list[dict[str, Any]]:
    """`count` messages from a real session, repeated with fresh tool-call ids as needed."""
    source = load_trace(HISTORY_TRACE)["messages"]
    out: list[dict[str, Any]] = []
    for lap in range(count // len(source) + 2):
        for message in source:
            out.append(_relabelled(message, lap))
    while out[count - 1].get("tool_calls"):
        count += 1  # never end on an unanswered call
    return out[:count]


def _relabelled(message: dict[str, Any], lap: int) -> dict[str, Any]:
    if not lap:
        return message
    if message.get("tool_calls"):
        calls = [{**c, "id": f"{c['id']}-{lap}"} for c in message["tool_calls"]]
        return {**message, "tool_calls": calls}
    if message.get("tool_call_id"):
        return {**message, "tool_call_id": f"{message['tool_call_id']}-{lap}"}
    return message


def body_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    system = {"role": "system", "content": "You are a careful coding agent."}
    return {"model": MODEL, "messages": [system, *messages]}


async def one_request(engine: ContextEngine, body: dict[str, Any], session: str) -> float:
    """Seconds spent in load → prepare → persist outputs → record for one request."""
    started = time.perf_counter()
    turn = await engine.load_turn("default", session, draft_from_body(body))
    prepared = await engine.prepare(body, turn=turn, api_key=None, recall=True)
    await engine.persist_outputs(prepared)
    await engine.record(
        prepared, usage=Usage(prompt_tokens=100), completed=True, messages_in=len(body["messages"])
    )
    return time.perf_counter() - started


def sessions(prefix: str) -> Iterator[str]:
    index = 0
    while True:
        index += 1
        yield f"{prefix}-{index}"
