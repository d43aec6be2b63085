"""A request's `Turn` loaded from a real store and real workspace files; neither fails it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pytest

from proxy.adapters.memory.store import MemoryStore
from proxy.adapters.redis.store import RedisStore
from proxy.adapters.workspace import FileWorkspace
from proxy.compaction.compactor import Compactor
from proxy.compaction.plan import CompactionPlan
from proxy.compaction.stored import make_compaction
from proxy.engine.engine import ContextEngine
from proxy.engine.pipeline import build_stack
from proxy.history import history_salt
from proxy.ports import StateStore, WorkspaceSource
from proxy.settings import TenantSettings, UpstreamSettings
from proxy.types import SessionState, Turn, WorkspaceView
from tests.factories import draft, user
from tests.redis_server import free_port

UPSTREAMS = {
    "openai": UpstreamSettings(),
    "anthropic": UpstreamSettings(kind="anthropic", cache_style="anthropic"),
}


def loader(
    *,
    store: StateStore | None = None,
    workspace: WorkspaceSource | None = None,
    tenants: Mapping[str, TenantSettings] | None = None,
    now: float = 42.0,
) -> ContextEngine:
    """An engine that loads turns (it never compacts)."""
    tenants = tenants or {"t": TenantSettings(name="t", upstream="openai")}
    store = store or MemoryStore()
    return ContextEngine(
        sessions=store,
        outputs=store,
        compactor=Compactor(store=store, summarizers={}),
        workspace=workspace or FileWorkspace(workspaces={}),
        stacks={n: build_stack(t, UPSTREAMS[t.upstream]) for n, t in tenants.items()},
        upstreams=UPSTREAMS,
        clock=lambda: now,
    )


async def load(engine: ContextEngine, tenant: str, session: str, model: str) -> tuple[Turn, bool]:
    """The turn of a one-message request for `model`, and whether the store was down."""
    turn = await engine.load_turn(tenant, session, draft([user("hi")], model=model))
    return turn, turn.degraded


class UnreadableWorkspace:
    """A `WorkspaceSource` whose every view fails, as a broken disk would."""

    def view(self, tenant: str, session: str) -> WorkspaceView:
        raise OSError("disk gone")


async def test_load_turn_names_the_request_and_reads_the_clock() -> None:
    turn, degraded = await load(loader(now=1_234.5), "t", "s1", "gpt-4o")
    assert (turn.tenant, turn.session, turn.model, turn.now) == ("t", "s1", "gpt-4o", 1_234.5)
    assert degraded is False


async def test_load_turn_carries_the_sessions_stored_state() -> None:
    store = MemoryStore()
    await store.record_turn(
        "t", "s1", fields={"last_prompt_tokens": 900}, counters={"requests": 2},
        decisions={"c1": "cut"},
    )  # fmt: skip
    turn, degraded = await load(loader(store=store), "t", "s1", "gpt-4o")
    assert turn.state.int_field("last_prompt_tokens") == 900
    assert turn.state.int_field("requests") == 2
    assert dict(turn.state.decisions) == {"c1": "cut"}
    assert degraded is False
    other, _ = await load(loader(store=store), "t", "s2", "gpt-4o")
    assert other.state == SessionState()


async def test_an_unreachable_store_gives_an_empty_state_and_says_degraded() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", op_timeout_s=0.2)
    try:
        turn, degraded = await load(loader(store=store), "t", "s1", "gpt-4o")
    finally:
        await store.close()
    assert degraded is True
    assert turn.state == SessionState()
    assert (turn.tenant, turn.session) == ("t", "s1")


async def test_load_turn_carries_the_tenants_workspace_view(tmp_path: Path) -> None:
    (tmp_path / "soul.md").write_text("I am t.", encoding="utf-8")
    (tmp_path / "sessions" / "s1").mkdir(parents=True)
    (tmp_path / "sessions" / "s1" / "user.md").write_text("Ada", encoding="utf-8")
    workspace = FileWorkspace(workspaces={"t": tmp_path})
    turn, _ = await load(loader(workspace=workspace), "t", "s1", "gpt-4o")
    assert turn.workspace.files == {"soul": ("I am t.",)}
    assert turn.workspace.session_files == {"user": "Ada"}
    assert turn.workspace == workspace.view("t", "s1")


async def test_an_unreadable_workspace_gives_an_empty_view_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="proxy.engine.engine")
    turn, degraded = await load(loader(workspace=UnreadableWorkspace()), "t", "s1", "gpt-4o")
    assert turn.workspace == WorkspaceView()
    assert degraded is False
    assert [r.getMessage() for r in caplog.records] == ["workspace of t unreadable"]


@pytest.mark.parametrize(
    ("tenant_window", "model", "expected"),
    [
        (None, "gpt-4o", 128_000),
        (None, "openai/gpt-4.1-mini", 1_047_576),
        (None, "claude-sonnet-4", 200_000),
        (None, "unknown-model", 128_000),
        (50_000, "gpt-4.1", 50_000),
        (300_000, "unknown-model", 300_000),
    ],
)
async def test_the_tenants_model_window_wins_over_the_models_own(
    tenant_window: int | None, model: str, expected: int
) -> None:
    tenants = {"t": TenantSettings(name="t", upstream="openai", model_window=tenant_window)}
    turn, _ = await load(loader(tenants=tenants), "t", "s1", model)
    assert turn.model_window == expected


async def test_each_tenant_gets_the_cache_style_of_its_own_upstream() -> None:
    tenants = {
        "a": TenantSettings(name="a", upstream="openai"),
        "b": TenantSettings(name="b", upstream="anthropic"),
    }
    turns = loader(tenants=tenants)
    assert (await load(turns, "a", "s1", "gpt-4o"))[0].cache_style == "openai"
    assert (await load(turns, "b", "s1", "claude-sonnet-4"))[0].cache_style == "anthropic"


async def test_load_turn_matches_the_sessions_stored_compaction_once_for_the_whole_request() -> (
    None
):
    store = MemoryStore()
    history = [user("a"), user("b"), user("c")]
    client = draft(history)
    salt = history_salt("t", client.system.client)
    summary = make_compaction(history, CompactionPlan(split=2), [user("S")], salt=salt)
    token = await store.acquire_lock("t", "s1", ttl_ms=1_000)
    assert token is not None
    assert await store.save_compaction("t", "s1", summary, snapshot_json=b"[]", lock_token=token)
    turn = await loader(store=store).load_turn("t", "s1", client)
    assert turn.applied == summary and turn.client is client
    edited = await loader(store=store).load_turn("t", "s1", draft([user("A"), *history[1:]]))
    assert edited.applied is None
