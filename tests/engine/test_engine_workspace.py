"""The engine's bootstrap through a real `FileWorkspace`: a cached assembly never hides a change
of the files, nor crosses from one tenant to another."""

from __future__ import annotations

from pathlib import Path

from proxy.adapters.memory.store import MemoryStore
from proxy.adapters.workspace import FileWorkspace
from proxy.compaction.compactor import Compactor
from proxy.engine.engine import ContextEngine
from proxy.engine.pipeline import build_stack, draft_from_body
from proxy.settings import TenantSettings, UpstreamSettings
from tests.factories import user


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_engine(tmp_path: Path, clock: Clock) -> ContextEngine:
    for tenant in ("a", "b"):
        (tmp_path / tenant).mkdir()
        (tmp_path / tenant / "soul.md").write_text(f"I am {tenant}.")
    upstream = UpstreamSettings()
    store = MemoryStore()
    return ContextEngine(
        sessions=store,
        outputs=store,
        workspace=FileWorkspace(
            workspaces={t: tmp_path / t for t in ("a", "b")}, recheck_s=1.0, clock=clock
        ),
        compactor=Compactor(store=store, summarizers={}),
        stacks={t: build_stack(TenantSettings(name=t, upstream="u"), upstream) for t in "ab"},
        upstreams={"u": upstream},
    )


async def system_text(engine: ContextEngine, tenant: str, session: str = "s1") -> str:
    body = {"model": "gpt-4o", "messages": [user("hi")]}
    turn = await engine.load_turn(tenant, session, draft_from_body(body))
    prepared = await engine.prepare(body, turn=turn, api_key=None)
    return str(prepared.body["messages"][0]["content"])


async def test_a_changed_workspace_file_reaches_the_system_prompt(tmp_path: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, clock)
    assert "I am a." in await system_text(engine, "a")
    (tmp_path / "a" / "soul.md").write_text("I am a, changed.")
    clock.now = 5.0  # past the workspace's recheck interval
    assert "I am a, changed." in await system_text(engine, "a")


async def test_tenants_and_sessions_do_not_share_an_assembly(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, Clock())
    session = tmp_path / "a" / "sessions" / "s2"
    session.mkdir(parents=True)
    (session / "user.md").write_text("Session two's user.")
    for _ in range(2):
        assert "I am a." in await system_text(engine, "a")
        assert "I am b." in await system_text(engine, "b")
        assert "Session two" not in await system_text(engine, "a")
        assert "Session two's user." in await system_text(engine, "a", "s2")
