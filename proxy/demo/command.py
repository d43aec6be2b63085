"""`ctxproxy demo`: the three mechanisms on a scripted agent session, offline and without a key.

Starts, in process, a SIMULATED upstream (`proxy.demo.upstream`) and the proxy in front of it,
then plays a short agent session through the `openai` SDK (`proxy.demo.play`). Before each request
it prints the token gauge (the prompt tokens the upstream reported last); it reports what
bootstrap added, the moment a tool result is pruned and when the history is compacted, each
measured by comparing what the agent sent with what the upstream received. Then a second session
(a new session id, "the next day") opens with a fact the first one's compaction learned.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai
    from aiohttp import web
    from rich.console import Console

    from proxy.demo.play import Send

SESSION = "demo"
NEXT_SESSION = "demo-next-day"


def add_demo_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser("demo", help="watch the proxy work on a simulated agent (offline)")
    demo.add_argument(
        "--workdir",
        type=Path,
        help="folder for the demo workspace, kept between runs (default: "
        "$XDG_CACHE_HOME/ctxproxy/demo, else ~/.cache/ctxproxy/demo)",
    )
    demo.set_defaults(run=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from proxy.config import demo_dir

    # Everything stays on this machine: the summarizer's HTTP client honours proxy variables,
    # so exempt the loopback servers of the demo from any configured proxy.
    loopback = "127.0.0.1,localhost"
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = f"{os.environ[name]},{loopback}" if os.environ.get(name) else loopback
    console = Console(highlight=False, soft_wrap=True)
    return asyncio.run(play(console=console, workdir=args.workdir or demo_dir(os.environ)))


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Run `app` on a free local port; yields its base URL."""
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


async def play(*, console: Console, workdir: Path) -> int:
    """Both servers on free local ports, then the scripted session (imports are heavy: here)."""
    import openai

    from proxy.demo.play import THRESHOLD, DemoSession, demo_settings, prepare_workspace
    from proxy.demo.script import SYSTEM, next_turns, turns
    from proxy.demo.upstream import SimulatedUpstream
    from proxy.server.app import create_app

    workspace, fresh = prepare_workspace(workdir)
    upstream = SimulatedUpstream()
    console.print("[bold]ctxproxy demo[/] — the model is a SIMULATED upstream (scripted, offline,")
    console.print("no key): it answers from a script and reports prompt tokens as chars / 4.\n")
    async with (
        serve(upstream.app()) as upstream_url,
        serve(create_app(demo_settings(workspace, upstream_url))) as proxy_url,
    ):
        console.print(f"proxy:     {proxy_url}/v1  (compaction at {THRESHOLD} tokens)")
        kept = "a copy of the sample" if fresh else "kept from an earlier run, with your edits"
        console.print(f"workspace: {workspace}  ({kept})\n")
        client = openai.AsyncOpenAI(
            base_url=f"{proxy_url}/v1",
            api_key="demo-key",
            max_retries=0,
            timeout=30,
            http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
        )
        memory_md = workspace / "memory" / "MEMORY.md"
        known = memory_md.read_text(encoding="utf-8") if memory_md.is_file() else ""
        async with client:
            for name, script in ((SESSION, turns()), (NEXT_SESSION, next_turns())):
                if name == NEXT_SESSION:
                    show_learned(console, workspace)
                    console.print(f"\n[bold]The next day, a new session[/] ({name}): only what"
                                  " the proxy keeps connects it to the first")  # fmt: skip
                send = openai_sender(client, session=name)
                session = DemoSession(console, send, upstream, system=SYSTEM, threshold=THRESHOLD,
                                      workspace_memory=known)  # fmt: skip
                for user_text, steps in script:
                    await session.turn(user_text, steps)
                if name == SESSION:
                    session.gauge("after compaction")
    show_where_to_look(console, workspace)
    return 0


def show_where_to_look(console: Console, workspace: Path) -> None:
    """The files the demo left behind, each with what it holds."""
    sessions = workspace / "sessions"
    console.print("\n[bold]Where to look[/]")
    console.print(f"  archive (full histories, before compaction): {sessions / 'raw.jsonl'}")
    console.print(
        f"  snapshot (the compacted history):            {sessions / f'ctx-{SESSION}.json'}"
    )
    console.print(f"  facts learned at compactions:                {learned_file(workspace)}")
    console.print(f"  bootstrap files (edit user.md and re-run):   {workspace}")
    console.print(f"The workspace is kept; delete {workspace} to start again from the sample.")


def learned_file(workspace: Path) -> Path:
    return workspace / "memory" / "learned.md"


def show_learned(console: Console, workspace: Path) -> None:
    """The facts the proxy keeps for the tenant (the embedded store's file in the workspace)."""
    from rich.text import Text

    path = learned_file(workspace)
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    facts = [line for line in lines if line.startswith("- ")]
    console.print(f"  [magenta]✎ memory:[/] {len(facts)} fact(s) kept for the tenant, in {path}:")
    for line in facts:
        console.print(Text(f"    {line}"))


def openai_sender(client: openai.AsyncOpenAI, *, session: str = SESSION) -> Send:
    """The agent's request, through the `openai` SDK as a real agent sends it."""
    from proxy.demo.script import tools

    async def send(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], Mapping[str, str]]:
        raw = await client.chat.completions.with_raw_response.create(
            model="simulated-model",
            messages=messages,  # type: ignore[arg-type]
            tools=tools(),  # type: ignore[arg-type]
            extra_headers={"X-Ctx-Session": session},
        )
        return raw.parse().model_dump(exclude_none=True), raw.headers

    return send
