"""`ctxproxy serve --workers N`: N processes serving one port, under a parent that binds it.

The parent binds the listening socket once (a port in use is one line, as for one process),
then forks the workers, which inherit the socket and accept from it, each with its own app,
event loop and store connections; the kernel hands each new connection to one of them. The
parent runs no event loop and no thread, so a fork copies nothing half-done.

- A worker that dies is forked again under the same number: at once, or after a pause that
  doubles (from 0.5 s to 10 s) while workers keep dying within a second of their start.
- On SIGTERM or SIGINT the parent closes its copy of the socket and passes SIGTERM to every
  worker, which drains as one process does (`proxy.server.runner`); a second signal is passed
  on as SIGINT and interrupts the drains; workers still alive 10 s after the drain timeout are
  killed. Workers sit in their own process group (a terminal's Ctrl-C reaches the parent only)
  and drain and stop by themselves when the parent is gone.
- `/metrics` of any worker answers for all of them (`proxy.server.observe.worker_metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import FrameType

from aiohttp import web

from proxy.server.admin import own_metrics
from proxy.server.observe.worker_metrics import WORKER_SET, WorkerSet, serving_own
from proxy.server.runner import SIGNALS, bound_url, serve
from proxy.settings import Settings

log = logging.getLogger("proxy")

KILL_AFTER_S = 10.0
"""How long past the drain timeout the parent waits for a worker before killing it."""
FAST_DEATH_S = 1.0
MAX_PAUSE_S = 10.0
TICK_S = 0.05


def serve_workers(settings: Settings, *, count: int, on_serving: Callable[[str], None]) -> int:
    """Bind `[server] host:port`, fork `count` workers, supervise them until a signal; the exit
    status (0 once all drained). A bind error is an `OSError` raised before any fork."""
    server = settings.server
    sock = socket.create_server((server.host, server.port), backlog=1024)
    folder = Path(tempfile.mkdtemp(prefix="ctxproxy-workers-"))
    try:
        supervisor = Supervisor(settings, sock=sock, count=count, folder=folder)
        return supervisor.run(on_serving=lambda: on_serving(bound_url(sock.getsockname())))
    finally:
        sock.close()
        shutil.rmtree(folder, ignore_errors=True)


class Supervisor:
    def __init__(self, settings: Settings, *, sock: socket.socket, count: int, folder: Path):
        self._settings = settings
        self._sock = sock
        self._count = count
        self._folder = folder
        self._children: dict[int, int] = {}  # pid -> worker number
        self._started: dict[int, float] = {}  # worker number -> when
        self._restart_at: dict[int, float] = {}
        self._pause: dict[int, float] = {}
        self._signals = 0

    def run(self, *, on_serving: Callable[[], None]) -> int:
        previous = {signum: signal.signal(signum, self._on_signal) for signum in SIGNALS}
        try:
            for index in range(self._count):
                self._fork(index)
            on_serving()
            self._supervise()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return 0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1

    def _supervise(self) -> None:
        handled, kill_at = 0, float("inf")
        while self._children or (not handled and self._restart_at):
            if self._signals > handled:
                if not handled:
                    self._sock.close()  # new connections are refused, as with one process
                    self._restart_at.clear()
                    kill_at = time.monotonic() + self._settings.server.drain_timeout_s
                    kill_at += KILL_AFTER_S
                    log.info("stopping %d workers…", len(self._children))
                self._tell(signal.SIGTERM if not handled else signal.SIGINT)
                handled = self._signals
            self._reap(stopping=bool(handled))
            now = time.monotonic()
            if now >= kill_at:
                self._tell(signal.SIGKILL)
            for index, at in list(self._restart_at.items()):
                if now >= at:
                    del self._restart_at[index]
                    self._fork(index)
            time.sleep(TICK_S)
        log.info("all workers stopped")

    def _tell(self, signum: int) -> None:
        for pid in self._children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def _reap(self, *, stopping: bool) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self._children.clear()
                return
            if pid == 0:
                return
            index = self._children.pop(pid, None)
            if index is None or stopping:
                continue
            lived = time.monotonic() - self._started[index]
            pause = 0.0
            if lived < FAST_DEATH_S:
                pause = min(MAX_PAUSE_S, max(0.5, 2 * self._pause.get(index, 0.0)))
            self._pause[index] = pause
            log.warning(
                "worker %d (pid %d) exited with status %d; restarting it%s",
                index, pid, os.waitstatus_to_exitcode(status),
                f" in {pause:g}s" if pause else "",
            )  # fmt: skip
            self._restart_at[index] = time.monotonic() + pause

    def _fork(self, index: int) -> None:
        workers = WorkerSet(index=index, count=self._count, folder=self._folder, parent=os.getpid())
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the parent's code
            code = 1
            try:
                os.setpgid(0, 0)
                for signum in SIGNALS:
                    signal.signal(signum, signal.SIG_DFL)
                code = run_worker(self._settings, self._sock, workers)
            except KeyboardInterrupt:
                code = 130
            except BaseException:
                log.exception("worker %d failed", index)
            finally:
                logging.shutdown()
                os._exit(code)
        self._children[pid] = index
        self._started[index] = time.monotonic()


def run_worker(settings: Settings, sock: socket.socket, workers: WorkerSet) -> int:
    """One worker: the app on the inherited socket until SIGTERM (drained) or its parent's end."""
    from proxy.server.app import create_app  # the app of this process, made after the fork

    async def main() -> None:
        app = create_app(settings)
        app[WORKER_SET] = workers

        async def own(request: web.Request) -> web.Response:
            return web.Response(body=await own_metrics(app))

        async def side(_: web.Application) -> AsyncIterator[None]:
            async with serving_own(workers, own):
                yield

        app.cleanup_ctx.append(side)
        stop = asyncio.Event()
        orphan = asyncio.create_task(_watch_parent(workers.parent, stop))
        try:
            await serve(
                app,
                drain_s=settings.server.drain_timeout_s,
                on_serving=lambda _: None,
                stop=stop,
                signals=True,
                sock=sock,
            )
        finally:
            orphan.cancel()

    asyncio.run(main())
    return 0


async def _watch_parent(parent: int, stop: asyncio.Event) -> None:
    """Set `stop` once the parent is gone (this process is then adopted by another)."""
    while os.getppid() == parent:  # noqa: ASYNC110 (no event says so: ask every second)
        await asyncio.sleep(1.0)
    log.warning("the parent process is gone; stopping")
    stop.set()
