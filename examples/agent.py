#!/usr/bin/env python3
"""A small ReAct-style command-line agent: think, call a tool, look at the result, repeat.

Tools: `bash` (runs a shell command, only after you confirm it) and `read_file`. At most
`--max-steps` (10) tool steps per turn. Works with any OpenAI-compatible endpoint; point it at
ctxproxy to have its context managed:

    ctxproxy serve &                      # or: docker compose up
    python examples/agent.py --base-url http://127.0.0.1:8787/v1 --model gpt-4o-mini

Settings come from the arguments or the environment: OPENAI_BASE_URL, OPENAI_API_KEY,
OPENAI_MODEL. Type `exit` (or Ctrl-D) to leave. Only the `openai` package is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from openai import OpenAI

SYSTEM = (
    "You are a careful command-line assistant on the user's machine. Think step by step. Use "
    "`read_file` to read files and `bash` for anything else; the user confirms each command. "
    "Keep commands short and safe. When you know the answer, reply without calling a tool."
)
OUTPUT_CAP = 100_000  # a runaway command should not fill the context; the proxy trims further
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command (after the user confirms); returns its output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file and return its content.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
]


def run_bash(command: str) -> str:
    answer = input(f"Run `{command}`? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        return "The user declined to run this command."
    try:
        done = subprocess.run(
            command, shell=True, capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired:
        return "error: the command timed out after 120 s"
    output = (done.stdout + done.stderr)[:OUTPUT_CAP]
    print(output.rstrip() or "(no output)")
    return f"exit code {done.returncode}\n{output}"


def read_file(path: str) -> str:
    try:
        return Path(path).expanduser().read_text(encoding="utf-8", errors="replace")[:OUTPUT_CAP]
    except OSError as exc:
        return f"error: {exc.strerror or exc}: {path}"


def call_tool(name: str, arguments: str) -> str:
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return "error: the tool arguments were not valid JSON"
    if name == "bash":
        return run_bash(str(args.get("command", "")))
    if name == "read_file":
        print(f"(reading {args.get('path')})")
        return read_file(str(args.get("path", "")))
    return f"error: unknown tool {name}"


def show_context(headers: Any) -> None:
    """What ctxproxy did to this request, when the endpoint is ctxproxy."""
    if "x-ctx-session" not in headers:
        return
    notes = [f"last prompt {headers.get('x-ctx-last-prompt-tokens', '?')} tokens"]
    if headers.get("x-ctx-pruned-chars", "0") != "0":
        notes.append(f"pruned {headers['x-ctx-pruned-chars']} chars")
    if headers.get("x-ctx-compacted") == "1":
        notes.append("history compacted")
    print(f"  [ctx: {', '.join(notes)}]")


def run_turn(client: OpenAI, model: str, messages: list[dict[str, Any]], max_steps: int) -> None:
    """Ask the model until it answers without a tool call, or `max_steps` tools have run."""
    for step in range(max_steps + 1):
        raw = client.chat.completions.with_raw_response.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
        )
        show_context(raw.headers)
        message = raw.parse().choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            print(f"agent> {message.content or ''}")
            return
        if step == max_steps:  # an unanswered call would make the history invalid
            messages.pop()
            break
        if message.content:
            print(f"  (thinking) {message.content}")
        for call in message.tool_calls:
            if call.type == "function":
                result = call_tool(call.function.name, call.function.arguments)
            else:
                result = "error: only function tools are supported"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    print(f"(stopped after {max_steps} tool steps; ask again to continue)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", default=env("OPENAI_BASE_URL", "http://127.0.0.1:8787/v1"))
    parser.add_argument("--model", default=env("OPENAI_MODEL", "gpt-4o-mini"))
    parser.add_argument("--api-key", default=env("OPENAI_API_KEY", "none"))
    parser.add_argument("--session", default=f"agent-{uuid.uuid4().hex[:8]}",
                        help="session id sent as X-Ctx-Session")  # fmt: skip
    parser.add_argument("--max-steps", type=int, default=10)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client = OpenAI(
        base_url=args.base_url,
        api_key=args.api_key,
        max_retries=2,
        default_headers={"X-Ctx-Session": args.session},
    )
    print(f"agent: {args.model} via {args.base_url} (session {args.session}); 'exit' quits")
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    while True:
        try:
            line = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if line in ("exit", "quit"):
            return 0
        if line:
            messages.append({"role": "user", "content": line})
            run_turn(client, args.model, messages, args.max_steps)


if __name__ == "__main__":
    sys.exit(main())
