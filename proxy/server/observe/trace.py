"""What one request did, handed to observers (metrics, events) after it is answered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from proxy.cost.pricing import Cost
from proxy.engine.prepared import Prepared
from proxy.server.recall_loop import RecallTally
from proxy.server.relay import Relayed


class Bill(NamedTuple):
    """One request's money (`proxy.server.observe.bill`): its `cost` (None: unpriced) and the
    estimated USD `saved` against the client's own body going direct (None: no estimate)."""

    cost: Cost | None = None
    saved: float | None = None


class Trace(NamedTuple):
    """A named tuple rather than a frozen dataclass: one is built per request, in a third of the
    time. Who asked (tenant, session, model, a degraded store) is read from `prepared.turn`."""

    stream: bool
    status: int
    prepared: Prepared
    relayed: Relayed
    messages_in: int
    prepare_s: float
    """Time the proxy spent before sending upstream (pipeline, store, compaction)."""
    upstream_s: float
    """From sending upstream to the end of the relay."""
    retried_overflow: bool = False
    bytes_out: int = 0
    """Size of the body sent upstream."""
    bill: Bill | None = None
    """What the request cost; None when its answer reported no usage (set before the events)."""
    miss: str | None = None
    """Why its cache reads fell against the previous request's (`proxy.cost.misses`), if so."""
    recall: RecallTally | None = None
    """What the recall loop did, when the request offered the tool."""

    @property
    def tenant(self) -> str:
        return self.prepared.turn.tenant

    @property
    def session(self) -> str:
        return self.prepared.turn.session

    @property
    def model(self) -> str:
        return self.prepared.turn.model

    @property
    def store_degraded(self) -> bool:
        """The session's state could not be loaded from the store (`Turn.degraded`)."""
        return self.prepared.turn.degraded


class Observer(Protocol):
    async def on_request(self, trace: Trace) -> None: ...


async def notify(observers: Sequence[Observer], trace: Trace) -> None:
    """Each observer in turn; one failing never stops the others, nor the request."""
    for observer in observers:
        try:
            await observer.on_request(trace)
        except Exception:  # observability must never break serving
            import logging

            logging.getLogger(__name__).warning("observer %s failed", type(observer).__name__)
