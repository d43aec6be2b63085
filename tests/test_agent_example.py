"""`examples/agent.py` in a pseudo-terminal, through the proxy, against the fake upstream."""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from proxy.config import load_settings
from proxy.server.app import create_app
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.server.harness import Proxy, write_config

AGENT = Path(__file__).resolve().parents[1] / "examples" / "agent.py"


class Terminal:
    """A child process on a pty; `expect` reads until a pattern shows up (blocking: run it in a
    thread so the servers on the test's event loop keep answering)."""

    def __init__(self, argv: list[str], *, cwd: Path) -> None:
        master, slave = os.openpty()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_PROXY": "127.0.0.1,localhost"}
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                                     env=env, start_new_session=True)  # fmt: skip
        os.close(slave)
        self.master = master
        self.seen = ""

    def expect(self, pattern: str, timeout: float = 20.0) -> str:
        regex = re.compile(pattern)
        waited = 0.0
        while not regex.search(self.seen):
            ready, _, _ = select.select([self.master], [], [], 0.1)
            waited += 0.1
            if waited > timeout:
                raise AssertionError(f"{pattern!r} not seen in:\n{self.seen}")
            if ready:
                try:
                    self.seen += os.read(self.master, 4096).decode(errors="replace")
                except OSError:  # the child closed the terminal
                    raise AssertionError(f"{pattern!r} not seen:\n{self.seen}") from None
        return self.seen

    def send(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> int:
        code = self.proc.wait(timeout=20)
        os.close(self.master)
        return code


@pytest.fixture
async def proxy(aiohttp_server: Any, tmp_path: Path) -> AsyncIterator[Proxy]:
    fake = FakeOpenAI()
    upstream = await aiohttp_server(fake.app())
    config = write_config(tmp_path, upstream=str(upstream.make_url("")).rstrip("/"))
    settings = load_settings(config, environ={"FAKE_UPSTREAM_KEY": "sk-upstream"})
    app = create_app(settings)
    server = await aiohttp_server(app)
    yield Proxy(fake=fake, server=server, app=app, settings=settings, workspace=tmp_path / "ws")


def bash_call(command: str) -> Reply:
    arguments = json.dumps({"command": command})
    return Reply(
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": arguments},
            }
        ]
    )


def start_agent(proxy: Proxy, cwd: Path) -> Terminal:
    return Terminal(
        [
            sys.executable,
            str(AGENT),
            "--base-url",
            proxy.base_url,
            "--model",
            "m",
            "--api-key",
            "sk-client",
            "--session",
            "pty-test",
        ],
        cwd=cwd,
    )


async def test_one_turn_with_a_confirmed_command(proxy: Proxy, tmp_path: Path) -> None:
    proxy.fake.script.extend(
        [bash_call("echo hello-from-tool"), Reply(content="The command printed hello-from-tool.")]
    )
    term = start_agent(proxy, tmp_path)

    def converse() -> int:
        term.expect(r"you> ")
        term.send("please say hello")
        term.expect(r"Run `echo hello-from-tool`\? \[y/N\]")
        term.send("y")
        term.expect(r"agent> The command printed hello-from-tool\.")
        term.expect(r"you> $")
        term.send("exit")
        return term.close()

    assert await asyncio.to_thread(converse) == 0
    assert "[ctx: last prompt" in term.seen  # the agent shows what the proxy did
    [first, second] = proxy.fake.chat
    assert [t["function"]["name"] for t in first.body["tools"]] == ["bash", "read_file"]
    tool = second.body["messages"][-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"
    assert tool["content"] == "exit code 0\nhello-from-tool\n"


async def test_a_declined_command_is_not_run(proxy: Proxy, tmp_path: Path) -> None:
    proxy.fake.script.extend([bash_call("touch made-by-agent"), Reply(content="Understood.")])
    term = start_agent(proxy, tmp_path)

    def converse() -> int:
        term.expect(r"you> ")
        term.send("make a file")
        term.expect(r"\[y/N\]")
        term.send("n")
        term.expect(r"agent> Understood\.")
        term.send("exit")
        return term.close()

    assert await asyncio.to_thread(converse) == 0
    assert not (tmp_path / "made-by-agent").exists()
    assert proxy.fake.chat[-1].body["messages"][-1]["content"] == (
        "The user declined to run this command."
    )
