"""`ContextEngine.prepare` given the client's draft by its caller: the same outcome as without."""

from __future__ import annotations

from pathlib import Path

from proxy.engine.pipeline import draft_from_body
from tests.engine.test_engine_workspace import Clock, make_engine
from tests.factories import exchange, system, user


async def test_prepare_with_the_callers_draft_equals_prepare_without(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, Clock())
    messages = [system("Be brief."), user("hi"), *exchange("c1", "x" * 900), user("go on")]
    body = {"model": "gpt-4o", "messages": messages, "max_tokens": 9}
    turn, _ = await engine.load_turn("a", "s1", "gpt-4o")
    plain = await engine.prepare(body, turn=turn, api_key=None)
    given = await engine.prepare(body, turn=turn, api_key=None, client=draft_from_body(body))
    assert given == plain
