"""The Redis store: `StateStore` on Redis (DESIGN §5), one pipelined round trip per operation.

    store       `RedisStore`: load, record, outputs, events, facts; the compactor's archive,
                lock and fenced save
    pool        the connection pool packing commands in C, and a lean pipeline
    breaker     the circuit breaker, per-operation timeout and bound on operations at once
    keys        the key layout (`{tenant:session}` hash tags: one session, one cluster slot)
    codec       stored values and the Lua scripts (fenced save, lock release)
    facts       learned facts: one hash per tenant (or session), an atomic add with dedupe
    admin       the operator's reads: the events stream, session listings, one session

May import the foundation and redis-py; nothing of another adapter.
"""
