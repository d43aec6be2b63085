"""`ctxproxy demo`: the three mechanisms on a scripted agent session, offline and without a key.

Starts, in process, a SIMULATED upstream (`proxy.demo_upstream`) and the proxy in front of it,
then plays a short agent session through the `openai` SDK (`proxy.demo_run`). Before each request
it prints the token gauge (the prompt tokens the upstream reported last); it reports what
bootstrap added, the moment a tool result is pruned and when the history is compacted, each
measured by comparing what the agent sent with what the upstream received.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path


def add_demo_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser("demo", help="watch the proxy work on a simulated agent (offline)")
    demo.add_argument("--workdir", type=Path, help="folder for the demo workspace (default: temp)")
    demo.set_defaults(run=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from proxy.demo_run import play  # heavy (SDK, server): imported only when the demo runs

    # Everything stays on this machine: the summarizer's HTTP client honours proxy variables,
    # so exempt the loopback servers of the demo from any configured proxy.
    loopback = "127.0.0.1,localhost"
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = f"{os.environ[name]},{loopback}" if os.environ.get(name) else loopback
    console = Console(highlight=False, soft_wrap=True)
    return asyncio.run(play(console=console, workdir=args.workdir))
