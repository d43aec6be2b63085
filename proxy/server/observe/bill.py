"""What a request cost in USD, and what the client's own body would have cost going direct.

`Biller.bill` prices the usage the answer reported at the model's entry in the price table
(`proxy.cost`); a model the table does not price gives a `Bill` without a cost (never a guess).
Without a table (`[server] prices` unset and none beside the config file) nothing is billed.

The saving is an estimate: per session, two simulated provider caches (`proxy.cost.cachesim`)
serve the client's own body (for an Anthropic-style cache, its last message marked when the
client marked nothing, as agents mark theirs) and the body ctxproxy sent, at the engine's clock;
the saving is the difference of their simulated prompt costs at the model's price. Both sides are
counted the same way (characters / 4), so the estimate's tokenizer error cancels in the
difference; output is the same either way and left out. It can be negative (ctxproxy cost more).
`cache_style = "none"` gives no estimate: no provider cache to simulate.

Memory is bounded: at most `max_sessions` sessions are simulated (the least recently billed is
dropped first: its next request starts cold on both sides); an Anthropic simulation keeps only
its live entries (a digest per marked block), an OpenAI one the block digests of its last two
prompts (`OpenAIDigests`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from proxy.cost.cachesim import AnthropicCache, CacheUse, OpenAIDigests
from proxy.cost.prices import Price, PriceTable, Unpriced
from proxy.cost.pricing import Cost, TokenCounts, price_counts, usage_counts
from proxy.server.observe.trace import Bill, Trace
from proxy.types import Draft
from proxy.usage import Usage

MAX_SESSIONS = 1024
Simulation = AnthropicCache | OpenAIDigests


class Biller:
    """Prices each answered request; keeps the per-session cache simulations of the saving."""

    def __init__(self, table: PriceTable | None, *, max_sessions: int = MAX_SESSIONS) -> None:
        self._table = table
        self._max_sessions = max_sessions
        self._sessions: OrderedDict[tuple[str, str], tuple[Simulation, Simulation]] = OrderedDict()

    def bill(self, trace: Trace) -> Bill | None:
        """The request's bill, or None when the answer reported no usage or there is no table."""
        usage = trace.relayed.usage
        if usage is None or self._table is None:
            return None
        price = self._table.lookup(trace.model)
        if isinstance(price, Unpriced):
            return Bill()
        return Bill(price_counts(usage_counts(usage), price), self._saved(trace, price))

    def price(self, model: str, usage: Usage | None) -> Cost | None:
        """What `usage` of `model` cost, or None without usage, a table or a price for it."""
        if usage is None or self._table is None:
            return None
        price = self._table.lookup(model)
        return None if isinstance(price, Unpriced) else price_counts(usage_counts(usage), price)

    def _saved(self, trace: Trace, price: Price) -> float | None:
        turn = trace.prepared.turn
        if turn.cache_style == "none" or not trace.relayed.completed:
            return None
        direct, proxied = self._simulations(turn.tenant, turn.session, turn.cache_style)
        mark = turn.cache_style == "anthropic" and not turn.client_marked
        went = _priced(direct.serve(client_body(turn.client, mark=mark), now=turn.now), price)
        sent = _priced(proxied.serve(dict(trace.prepared.body), now=turn.now), price)
        for simulation in (direct, proxied):
            if isinstance(simulation, AnthropicCache):  # keep the live entries only
                live = {k: v for k, v in simulation.entries.items() if v[0] >= turn.now}
                simulation.entries = live
        return went - sent

    def _simulations(self, tenant: str, session: str, style: str) -> tuple[Simulation, Simulation]:
        key = (tenant, session)
        pair = self._sessions.pop(key, None)
        if pair is None:
            pair = (
                (AnthropicCache(), AnthropicCache())
                if style == "anthropic"
                else (
                    OpenAIDigests(),
                    OpenAIDigests(),
                )
            )
        self._sessions[key] = pair
        while len(self._sessions) > self._max_sessions:
            self._sessions.popitem(last=False)
        return pair


def client_body(client: Draft, *, mark: bool) -> dict[str, Any]:
    """The client's own body as it sent it (copying nothing it holds); `mark`: with its last
    message marked for the cache, as agents mark theirs (for a client that marked nothing)."""
    messages = [*client.system.client, *client.messages]
    if mark and messages:
        messages[-1] = {**messages[-1], "cache_control": {"type": "ephemeral"}}
    return {**client.body, "messages": messages}


def _priced(use: CacheUse, price: Price) -> float:
    written = min(use.written, use.prompt - use.read)
    counts = TokenCounts(
        input=use.prompt - use.read - written,
        cache_read=use.read,
        cache_write=written - use.written_1h,
        cache_write_1h=use.written_1h,
    )
    return price_counts(counts, price).total
