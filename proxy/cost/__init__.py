"""What requests cost in money, and why a provider cache missed. Pure: no network, no clock.

In the order a request meets them:
- `prices`   — the price table (`config/prices.toml`): load, validate, look a model up
               (`Unpriced` for a model it does not list: never a guess);
- `pricing`  — a request's usage (OpenAI chat, Responses or Anthropic shape) split into input,
               cache reads, cache writes and output, and priced;
- `misses`   — why the session's cached tokens fell: client, prune, compaction, bootstrap, ttl,
               unknown, from facts the engine records per request;
- `cachesim` — Anthropic's and OpenAI's prompt caches, simulated: what a body would read and
               write (the benchmarks' replays; the estimate of what the client's own body costs).
Imports: the standard library, orjson and each other only (the benchmarks and, later, the
server import this package; it imports neither). `prices.load_prices` is its one file read.
"""
