"""benchmarks/payloads.py: the coding agent's body is valid, sized as intended, the same bytes
every run, and the proxy forwards it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from typing import Any

import orjson
import pytest
from openai.types.chat import ChatCompletion

from benchmarks.common import ROOT, TRACES
from benchmarks.overhead import cells_for
from benchmarks.payloads import CODING_TRACE, SIZES, body_for
from benchmarks.validity import problems
from tests.server.conftest import MakeProxy
from tests.server.conftest import make_proxy as make_proxy

pytestmark = pytest.mark.skipif(
    not (TRACES / CODING_TRACE).exists(), reason="../shared/traces is not available"
)

DIGEST = (
    "import hashlib, orjson; from benchmarks.payloads import body_for; "
    "print(hashlib.sha256(orjson.dumps(body_for('coding', stream=False))).hexdigest())"
)


@pytest.fixture(scope="module")
def coding() -> dict[str, Any]:
    return body_for("coding", stream=False)


def test_coding_body_is_valid_for_a_strict_upstream(coding: dict[str, Any]) -> None:
    assert problems(coding) == []
    assert problems(body_for("coding", stream=True)) == []


def test_coding_body_has_a_long_system_prompt_many_tools_and_a_real_history(
    coding: dict[str, Any],
) -> None:
    system, *history = coding["messages"]
    assert system["role"] == "system"
    assert 25_000 <= len(system["content"].encode()) <= 35_000
    assert system["content"].count("\n# ") >= 10
    assert len(coding["tools"]) >= 20
    assert 40 <= len(history) <= 60
    assert sum(1 for m in history if m.get("tool_calls")) >= 15
    assert not any("reasoning_content" in m for m in history)
    assert 150_000 <= len(orjson.dumps(coding)) <= 250_000


def test_coding_body_tools_are_json_schema_functions_covering_every_call(
    coding: dict[str, Any],
) -> None:
    defined = {t["function"]["name"] for t in coding["tools"]}
    assert len(defined) == len(coding["tools"])
    for tool in coding["tools"]:
        assert tool["type"] == "function"
        assert tool["function"]["parameters"]["type"] == "object"
    called = {c["function"]["name"] for m in coding["messages"] for c in m.get("tool_calls") or ()}
    assert called <= defined
    for message in coding["messages"]:
        for call in message.get("tool_calls") or ():
            json.loads(call["function"]["arguments"])


def test_coding_body_is_the_same_bytes_in_another_process(coding: dict[str, Any]) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "12345", "CTXPROXY_TRACES": str(TRACES)}
    done = subprocess.run([sys.executable, "-c", DIGEST], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    assert done.stdout.strip() == hashlib.sha256(orjson.dumps(coding)).hexdigest()


def test_every_overhead_cell_has_a_body() -> None:
    assert {cell.size for cell in cells_for(quick=False)} == set(SIZES)
    assert {c.concurrency for c in cells_for(quick=False) if c.size == "coding"} == {1, 16}
    assert "coding" not in {cell.size for cell in cells_for(quick=True)}
    with pytest.raises(ValueError, match="unknown payload size"):
        body_for("huge", stream=False)


async def test_the_proxy_forwards_the_coding_body_valid_and_with_its_tools(
    make_proxy: MakeProxy, coding: dict[str, Any]
) -> None:
    proxy = await make_proxy()
    async with proxy.client() as client:
        # The low-level `post` (raises unless 200): `create` would type-walk the whole body.
        await client.post("/chat/completions", cast_to=ChatCompletion, body=coding)
    sent = proxy.fake.received[-1].body
    assert problems(sent) == []
    # the client's tools as they came, then the recall tool (the history's old results were cut)
    assert sent["tools"][:-1] == coding["tools"]
    assert sent["tools"][-1]["function"]["name"] == "ctx_recall"
    assert sent["messages"][-1] == coding["messages"][-1]
