"""Run the demo: a SIMULATED upstream and the proxy in process, then the scripted session.

`play` starts both servers on free local ports (the proxy: `create_app`, embedded store, a copy of
the default workspace, compaction at 6,000 tokens) and plays `proxy.demo_script` through the
`openai` SDK with `proxy.demo_play.DemoSession`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import openai
from aiohttp import web
from rich.console import Console

from proxy.demo_play import DemoSession
from proxy.demo_script import SYSTEM, TURNS
from proxy.demo_upstream import SimulatedUpstream
from proxy.server.app import create_app
from proxy.settings import Settings, StoreSettings, TenantSettings, UpstreamSettings
from proxy.stages.compact import CompactSettings

THRESHOLD = 6000
SESSION = "demo"
DEFAULT_WORKSPACE = Path(__file__).resolve().parents[1] / "config" / "workspaces" / "default"
FALLBACK_PROFILE = "# About the user\n\n- Name: Maya Lindqvist. Call her Maya.\n"


def prepare_workspace(workdir: Path | None) -> Path:
    """A fresh copy of the default workspace (a minimal profile if the checkout has none)."""
    root = workdir or Path(tempfile.mkdtemp(prefix="ctxproxy-demo-"))
    workspace = root / "workspace"
    if workspace.exists():
        shutil.rmtree(workspace)
    if DEFAULT_WORKSPACE.is_dir():
        shutil.copytree(DEFAULT_WORKSPACE, workspace)
    else:
        workspace.mkdir(parents=True)
        (workspace / "user.md").write_text(FALLBACK_PROFILE, encoding="utf-8")
    return workspace


def demo_settings(workspace: Path, upstream_url: str) -> Settings:
    upstream = UpstreamSettings(
        name="simulated", base_url=f"{upstream_url}/v1", api_key="simulated", cache_style="openai"
    )
    tenant = TenantSettings(
        workspace=workspace,
        upstream="simulated",
        compact=CompactSettings(threshold_tokens=THRESHOLD),
    )
    return Settings(
        store=StoreSettings(url="memory://"),
        upstreams={"simulated": upstream},
        tenants={"default": tenant},
        source="<demo>",
    )


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Run `app` on a free local port; yields its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


async def play(*, console: Console, workdir: Path | None) -> int:
    workspace = prepare_workspace(workdir)
    upstream = SimulatedUpstream()
    console.print("[bold]ctxproxy demo[/] — the model is a SIMULATED upstream (scripted, offline,")
    console.print("no key): it answers from a script and reports prompt tokens as chars / 4.\n")
    async with (
        serve(upstream.app()) as upstream_url,
        serve(create_app(demo_settings(workspace, upstream_url))) as proxy_url,
    ):
        console.print(f"proxy:     {proxy_url}/v1  (compaction at {THRESHOLD} tokens)")
        console.print(f"workspace: {workspace}\n")
        client = openai.AsyncOpenAI(
            base_url=f"{proxy_url}/v1",
            api_key="demo-key",
            max_retries=0,
            timeout=30,
            http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
        )
        async with client:
            session = DemoSession(
                console, client, upstream, system=SYSTEM, session=SESSION, threshold=THRESHOLD
            )
            for user_text, steps in TURNS:
                await session.turn(user_text, steps)
            session.gauge("after compaction")
    sessions = workspace / "sessions"
    console.print("\n[bold]Where to look[/]")
    console.print(f"  archive (full histories, before compaction): {sessions / 'raw.jsonl'}")
    console.print(
        f"  snapshot (the compacted history):            {sessions / f'ctx-{SESSION}.json'}"
    )
    console.print(f"  bootstrap files (edit user.md and re-run):   {workspace}")
    return 0
