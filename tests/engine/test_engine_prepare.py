"""`ContextEngine.prepare` reads the request's flags from its turn: the store being down there
means nothing is persisted (a persisted output's id would 404)."""

from __future__ import annotations

from pathlib import Path

from proxy.engine.pipeline import draft_from_body
from tests.engine.test_engine_workspace import Clock, make_engine
from tests.factories import exchange, user


async def test_a_turn_loaded_with_the_store_down_persists_no_output(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, Clock())
    body = {"model": "gpt-4o", "messages": [user("read it"), *exchange("c1", "x" * 60_000)]}
    turn = await engine.load_turn("a", "s1", draft_from_body(body))
    assert turn.degraded is False and turn.client == draft_from_body(body)
    served = await engine.prepare(body, turn=turn, api_key=None)
    assert len(served.tally.outputs) == 1
    down = await engine.prepare(body, turn=turn._replace(degraded=True), api_key=None)
    assert down.tally.outputs == {}
    assert len(down.body["messages"][-1]["content"]) < 60_000  # still cut, not persisted
