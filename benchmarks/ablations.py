"""Switch ctxproxy features off in the server process, to measure what each one costs.

`python -m benchmarks.ablations --off pipeline,task -- serve --config ctxproxy.toml` applies the
named ablations, then runs `ctxproxy` with the arguments after `--`, as `python -m proxy` would.
`--list` prints the ablations. An ablated proxy is for measuring only: it is not a correct proxy.

Each ablation replaces attributes where the serving code looks them up at call time
(`proxy.server.chat.explicit_session_id`, not `proxy.identity.explicit_session_id`). Replacing an
attribute that no longer exists raises `AttributeError` at start-up, so a function that moved can
never be measured as costing nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import types
from collections.abc import Callable, Coroutine, Generator, Iterable, Sequence
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

from proxy.adapters.upstream import openai_chat as openai_upstream
from proxy.adapters.upstream import transport
from proxy.engine.engine import ContextEngine, Prepared
from proxy.engine.prepared import tally
from proxy.server import chat, middlewares
from proxy.server.appkeys import Lifecycle
from proxy.server.observe.events import EventEmitter
from proxy.server.observe.metrics import Metrics
from proxy.types import JSON, Turn


class Patches:
    """Attribute replacements, each of an attribute that must exist; `undo()` restores them."""

    def __init__(self) -> None:
        self.replaced: list[tuple[Any, str, Any, bool]] = []

    def replace(self, owner: Any, name: str, value: Any) -> None:
        """`AttributeError` when `owner` has no `name`: the code moved, the ablation is stale."""
        original = getattr(owner, name)
        self.replaced.append((owner, name, original, name in vars(owner)))
        setattr(owner, name, value)

    def undo(self) -> None:
        while self.replaced:
            owner, name, original, own = self.replaced.pop()
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)


Ablation = Callable[[Patches], None]


def skip_pipeline(patches: Patches) -> None:
    """`ContextEngine.prepare` sends the client's body as it came: no stage, no lineage."""

    async def prepare(self: ContextEngine, body: JSON, *, turn: Turn, **_: Any) -> Prepared:
        return Prepared(turn, body, (), "", 0, 0, tally(()))

    patches.replace(ContextEngine, "prepare", prepare)


def skip_after(patches: Patches) -> None:
    """No after-work: `chat.after` does nothing and runs inline, so this includes `task`."""

    async def after(*_: Any) -> None:
        return None

    patches.replace(chat, "after", after)
    run_inline(patches)


def skip_record(patches: Patches) -> None:
    """`ContextEngine.record` writes nothing to the session state (its events go on their own)."""

    async def record(self: ContextEngine, _: Prepared, *, events: Any = (), **__: Any) -> bool:
        for event in events:  # the request's events, which otherwise ride with the record
            await self._sessions.emit_event(event)  # the whole store, at run time
        return True

    patches.replace(ContextEngine, "record", record)


def skip_metrics(patches: Patches) -> None:
    """`Metrics.on_request` and the middleware's `count_request` update no metric."""

    async def on_request(self: Metrics, trace: Any) -> None:
        return None

    def count_request(request: web.Request, scope: Any, status: int) -> None:
        return None

    patches.replace(Metrics, "on_request", on_request)
    patches.replace(middlewares, "count_request", count_request)


def skip_events(patches: Patches) -> None:
    """`EventEmitter.entries` builds no event: the session record goes without."""

    def entries(self: EventEmitter, trace: Any) -> list[dict[str, str]]:
        return []

    patches.replace(EventEmitter, "entries", entries)


def run_inline(patches: Patches) -> None:
    """`Lifecycle.spawn` runs the after-work inline, not as a task (a task if it suspends)."""

    def spawn(self: Lifecycle, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            waiting = coro.send(None)
        except StopIteration:
            return
        task: asyncio.Task[None] = asyncio.ensure_future(_resumed(coro, waiting))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    patches.replace(Lifecycle, "spawn", spawn)


@types.coroutine
def _resumed(coro: Coroutine[Any, Any, Any], waiting: Any) -> Generator[Any, None, None]:
    """Drive `coro`, already run up to yielding `waiting`, to its end (the task's send values
    are always None; a cancellation is thrown in)."""
    while True:
        try:
            try:
                yield waiting
            except BaseException as exc:
                waiting = coro.throw(exc)
            else:
                waiting = coro.send(None)
        except StopIteration:
            return


def constant_session(patches: Patches) -> None:
    """`chat.explicit_session_id` returns a constant: no header ladder, no derived id."""

    def explicit_session_id(*_: Any) -> str:
        return "bench-session"

    patches.replace(chat, "explicit_session_id", explicit_session_id)


def no_ctx_headers(patches: Patches) -> None:
    """`chat.ctx_headers` returns {}: no `X-Ctx-*` headers built (the session one is stamped)."""

    def ctx_headers(*_: Any, **__: Any) -> dict[str, str]:
        return {}

    patches.replace(chat, "ctx_headers", ctx_headers)


def no_header_filter(patches: Patches) -> None:
    """The OpenAI adapter sends and relays no headers but its own: no filtering either way."""

    def nothing(*_: Any, **__: Any) -> CIMultiDict[str]:
        return CIMultiDict()

    patches.replace(openai_upstream, "upstream_request_headers", nothing)
    # the relayed headers are filtered in the transport (the Messages pass-through's too)
    patches.replace(transport, "client_response_headers", nothing)


def no_body_checks(patches: Patches) -> None:
    """`chat.read_chat_body` only parses: no nesting, shape, routing-key or marker checks."""

    async def read_chat_body(request: web.Request, **_: Any) -> tuple[JSON, bool]:
        body: JSON = orjson.loads(await request.read())
        return body, True  # unscanned: the pipeline looks for markers itself

    patches.replace(chat, "read_chat_body", read_chat_body)


ABLATIONS: dict[str, Ablation] = {
    "pipeline": skip_pipeline,
    "after": skip_after,
    "record": skip_record,
    "metrics": skip_metrics,
    "events": skip_events,
    "task": run_inline,
    "session_id": constant_session,
    "ctx_headers": no_ctx_headers,
    "header_filter": no_header_filter,
    "body_checks": no_body_checks,
}


def parse_names(text: str) -> tuple[str, ...]:
    """`a,b` → ("a", "b"); `ValueError` naming the known ones for an unknown name."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation(s) {', '.join(unknown)}; known: {', '.join(ABLATIONS)}")
    return names


def apply(names: Iterable[str]) -> Patches:
    """Apply the named ablations in order; `ValueError` for an unknown name (nothing applied)."""
    chosen = parse_names(",".join(names))
    patches = Patches()
    try:
        for name in chosen:
            ABLATIONS[name](patches)
    except BaseException:
        patches.undo()
        raise
    return patches


def describe(name: str) -> str:
    """The ablation's one-line docstring: what it removes."""
    return (ABLATIONS[name].__doc__ or "").strip()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    split = args.index("--") if "--" in args else len(args)
    own, proxy_argv = args[:split], args[split + 1 :]
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ablations", description=__doc__)
    parser.add_argument("--off", default="", help="ablations to apply, comma-separated")
    parser.add_argument("--list", action="store_true", help="print the ablations and exit")
    options = parser.parse_args(own)
    if options.list:
        for name in ABLATIONS:
            print(f"{name:14} {describe(name)}")
        return 0
    try:
        names = parse_names(options.off)
    except ValueError as exc:
        parser.error(str(exc))
    apply(names)
    print(f"ablations off: {', '.join(names) or 'none'}", file=sys.stderr, flush=True)
    from proxy.cli.main import main as ctxproxy

    return ctxproxy(proxy_argv)


if __name__ == "__main__":
    sys.exit(main())
