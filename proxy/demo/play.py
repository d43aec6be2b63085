"""The agent side of `ctxproxy demo`: sends the scripted turns through the proxy with the `openai`
SDK, runs the (simulated) tools, and narrates what the proxy did to each request.

What the proxy did is measured, not assumed: the agent's own messages are compared with what the
SIMULATED upstream received (bootstrap sections, pruned tool results, compacted history).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.text import Text

from proxy.cli.view import context_bar
from proxy.compaction.policy import CompactSettings
from proxy.demo.script import FILES, LISTING, call_transcript
from proxy.demo.upstream import Call, Say, SimulatedUpstream
from proxy.errors import ConfigError
from proxy.settings import Settings, StoreSettings, TenantSettings, UpstreamSettings
from proxy.stages.prune import PruneSettings
from proxy.usage import CHARS_PER_TOKEN

Send = Callable[[list[dict[str, Any]]], Awaitable[tuple[dict[str, Any], Mapping[str, str]]]]
"""Sends the history through the proxy; the completion (JSON) and the response headers."""

THRESHOLD = 6000
DEFAULT_WORKSPACE = Path(__file__).resolve().parents[2] / "config" / "workspaces" / "default"
FALLBACK_PROFILE = "# About the user\n\n- Name: Maya Lindqvist. Call her Maya.\n"
MAX_STEPS = 10
MARGIN_TOKENS = 150
SECTION = re.compile(r"<(soul|user_profile|agent|memory_index)>")
MEMORY_INDEX = re.compile(r"<memory_index>\n(.*?)\n</memory_index>", re.DOTALL)


class DemoSession:
    def __init__(
        self,
        console: Console,
        send: Send,
        upstream: SimulatedUpstream,
        *,
        system: str,
        threshold: int,
        workspace_memory: str = "",
    ) -> None:
        """`workspace_memory`: the workspace's `memory/MEMORY.md`, so that the memory index's
        other lines can be told as learned."""
        self._console = console
        self._workspace_memory = set(workspace_memory.splitlines())
        self._first = True
        self._send = send
        self._upstream = upstream
        self._threshold = threshold
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        self.tokens = 0
        self.cached = 0
        self._pruned: set[str] = set()
        self._hints: dict[str, str] = {}

    def gauge(self, label: str = "") -> None:
        """`[tokens: 881 / 6000]` and a bar: the last prompt tokens against the threshold."""
        if not label and self.tokens > self._threshold:
            label = "over the threshold: this request gets compacted"
        line = Text(f"[tokens: {self.tokens} / {self._threshold}] ", style="bold")
        line += context_bar(self.tokens, self._threshold, width=20)[:20]
        if self.tokens:
            line += Text(f"  cached {self.cached * 100 // self.tokens}%", style="dim")
        self._console.print(line + Text(f"  {label}" if label else "", style="dim"))

    async def turn(self, user_text: str, steps: Sequence[Say | Call]) -> None:
        """One user turn: the model's steps are scripted; at most `MAX_STEPS` requests."""
        if "{transcript}" in user_text:
            user_text = self._with_transcript(user_text)
        self.messages.append({"role": "user", "content": user_text})
        self._upstream.script.extend(steps)
        first_line = user_text.splitlines()[0]
        extra = f" (+ a pasted transcript, {len(user_text)} chars)" if "\n" in user_text else ""
        self._console.print(f"\n[bold cyan]Maya:[/] {first_line}{extra}")
        for _ in range(MAX_STEPS):
            message = await self._request()
            calls = message.get("tool_calls") or []
            if not calls:
                self._console.print(f"[bold green]Wren:[/] {message.get('content')}")
                return
            for call in calls:
                self.messages.append(self._run_tool(call))

    def _with_transcript(self, user_text: str) -> str:
        """Size the pasted transcript so that this request lands just under the threshold and
        the next one (which adds a tool result) just over it, whatever the workspace holds."""
        before = len(orjson.dumps(self.messages[-1:])) + len(user_text) + 64
        budget = (self._threshold - MARGIN_TOKENS - self.tokens) * CHARS_PER_TOKEN - before
        return user_text.replace("{transcript}", call_transcript(max(budget, 0)))

    async def _request(self) -> dict[str, Any]:
        self.gauge()
        completion, headers = await self._send(self.messages)
        self._narrate(self._upstream.received[-1]["messages"], headers=headers)
        usage = completion.get("usage") or {}
        self.tokens = int(usage.get("prompt_tokens") or 0)
        self.cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        message: dict[str, Any] = completion["choices"][0]["message"]
        self.messages.append(message)
        return message

    def _narrate(self, received: list[dict[str, Any]], *, headers: Mapping[str, str]) -> None:
        if self._first:
            self._first = False
            system = str(received[0].get("content", "")) if received else ""
            tags = ", ".join(f"<{t}>" for t in SECTION.findall(system))
            self._console.print(f"  [magenta]+ bootstrap:[/] {tags} added ({len(system)} chars"
                                " of system prompt, the agent's own is inside)")  # fmt: skip
            for line in self._learned(system):
                self._console.print(Text(f"  + remembered (learned earlier): {line}", "magenta"))
        sent = {m["tool_call_id"]: m for m in self.messages if m.get("role") == "tool"}
        for message in received:
            original = sent.get(message.get("tool_call_id", ""))
            if original is None or message["tool_call_id"] in self._pruned:
                continue
            before, after = len(original["content"]), len(str(message.get("content", "")))
            if after < before:
                self._pruned.add(message["tool_call_id"])
                what = self._hints.get(message["tool_call_id"], "a tool result")
                self._console.print(f"  [yellow]✂ pruned[/] {what}: {before} → {after} chars")
        if headers.get("X-Ctx-Compacted") == "1":
            before, after = _history_len(self.messages), _history_len(received)
            self._console.print(
                f"  [red]⇣ compacted:[/] {before} messages → {after} "
                "(the first message, a summary, the recent ones; the full history was archived)"
            )

    def _learned(self, system: str) -> list[str]:
        """The lines of the memory index sent upstream that the workspace's file does not hold:
        the facts earlier compactions learned."""
        found = MEMORY_INDEX.search(system)
        lines = found.group(1).splitlines() if found else []
        return [line for line in lines if line not in self._workspace_memory]

    def _run_tool(self, call: dict[str, Any]) -> dict[str, Any]:
        name = call["function"]["name"]
        path = orjson.loads(call["function"]["arguments"] or "{}").get("path", "")
        missing = f"error: no such file: {path}"
        result = LISTING if name == "list_dir" else FILES.get(path, missing)
        self._console.print(f"  [dim]tool {name}({path}) → {len(result)} chars[/]")
        self._hints[call["id"]] = f"{name}({path})"
        return {"role": "tool", "tool_call_id": call["id"], "content": result}


def _history_len(messages: Sequence[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") not in ("system", "developer"))


def prepare_workspace(root: Path) -> tuple[Path, bool]:
    """`root/workspace`, and whether it was made now: a copy of the default workspace (a
    minimal profile if the checkout has none) when absent; an existing folder is used as it is,
    never deleted or overwritten, so edits to it survive re-runs."""
    workspace = root / "workspace"
    if workspace.is_dir():
        return workspace, False
    if workspace.exists():
        raise ConfigError("is not a folder", key="demo workspace", file=str(workspace))
    if DEFAULT_WORKSPACE.is_dir():
        shutil.copytree(DEFAULT_WORKSPACE, workspace)
    else:
        workspace.mkdir(parents=True)
        (workspace / "user.md").write_text(FALLBACK_PROFILE, encoding="utf-8")
    return workspace, True


def demo_settings(workspace: Path, upstream_url: str) -> Settings:
    upstream = UpstreamSettings(
        name="simulated", base_url=f"{upstream_url}/v1", api_key="simulated", cache_style="openai"
    )
    tenant = TenantSettings(
        workspace=workspace,
        upstream="simulated",
        compact=CompactSettings(threshold_tokens=THRESHOLD),
        # Prune as soon as a result is old: the demo's turns come seconds apart, and waiting for
        # a provider cache to go cold (the default) would show no pruning at all.
        prune=PruneSettings(when_cache_cold_s=0),
    )
    return Settings(
        store=StoreSettings(url="memory://"),
        upstreams={"simulated": upstream},
        tenants={"default": tenant},
        source="<demo>",
    )
