"""`/metrics` for a set of worker processes: every worker's series, each with a `worker` label.

With `serve --workers N` each worker keeps its own registry (recording stays plain arithmetic in
one process). A worker serves that registry, every sample labelled `worker="K"`, on a Unix
socket of its own in the set's private folder (`serving_own`); the worker a scrape reaches
asks the others there at once and answers with all their families merged: one `# HELP`/`# TYPE`
per family, the samples of every worker that answered within `ASK_TIMEOUT_S`. A restarted
worker keeps its number and starts its series at 0, which Prometheus reads as a counter reset of
that series alone; sum over `worker` for the whole set (`sum without (worker) (rate(...))`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

ASK_TIMEOUT_S = 2.0
OWN_PATH = "/metrics/own"


@dataclass(frozen=True, slots=True)
class WorkerSet:
    """Worker `index` of `count`; `folder` holds each worker's metrics socket."""

    index: int
    count: int
    folder: Path
    parent: int
    """The parent's process id: a worker stops when its parent is gone."""

    def socket_of(self, index: int) -> Path:
        return self.folder / f"worker-{index}.sock"


WORKER_SET = web.AppKey("worker_set", WorkerSet)


class Labelled(Collector):
    """Every family of `registry` with `worker="<index>"` added to each sample."""

    def __init__(self, registry: CollectorRegistry, index: int) -> None:
        self._registry = registry
        self._label = str(index)

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            labelled = Metric(family.name, family.documentation, family.type, family.unit)
            labelled.samples = [
                s._replace(labels={**s.labels, "worker": self._label}) for s in family.samples
            ]
            yield labelled


class Merged(Collector):
    """Families of several expositions merged by name (their samples one after another)."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._texts = list(texts)

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for text in self._texts:
            for family in text_string_to_metric_families(text):
                known = families.setdefault(family.name, family)
                if known is not family:
                    known.samples.extend(family.samples)
        yield from families.values()


def own_exposition(registry: CollectorRegistry, workers: WorkerSet) -> bytes:
    """This worker's registry in the text format, every sample labelled with its number."""
    own = CollectorRegistry(auto_describe=False)
    own.register(Labelled(registry, workers.index))
    return generate_latest(own)


async def gathered_exposition(own: bytes, workers: WorkerSet) -> bytes:
    """`own` and every other worker's exposition, merged; a worker that does not answer in
    time (restarting, or stuck) is left out of this scrape."""
    others = [i for i in range(workers.count) if i != workers.index]
    texts = await asyncio.gather(*(_ask(workers.socket_of(i)) for i in others))
    merged = CollectorRegistry(auto_describe=False)
    merged.register(Merged([own.decode(), *(t for t in texts if t)]))
    return generate_latest(merged)


async def _ask(path: Path) -> str:
    try:
        async with (
            aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=str(path)),
                timeout=aiohttp.ClientTimeout(total=ASK_TIMEOUT_S),
            ) as http,
            http.get(f"http://worker{OWN_PATH}") as response,
        ):
            return await response.text() if response.status == 200 else ""
    except (aiohttp.ClientError, OSError, TimeoutError):
        return ""


@contextlib.asynccontextmanager
async def serving_own(
    workers: WorkerSet, own: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> AsyncIterator[None]:
    """Serve `own` (this worker's exposition) at `OWN_PATH` on the worker's Unix socket."""
    side = web.Application()
    side.router.add_get(OWN_PATH, own)
    runner = web.AppRunner(side, access_log=None)
    await runner.setup()
    path = workers.socket_of(workers.index)
    path.unlink(missing_ok=True)  # the socket of this worker's previous life
    try:
        await web.UnixSite(runner, str(path)).start()
        yield
    finally:
        await runner.cleanup()
