"""The Redis store: `StateStore` on one Redis server, a Sentinel set or a Redis Cluster.

    store       `RedisStore`: load, record, outputs, events, facts, Responses records and the
                handle secret; the compactor's archive, lock and fenced save; each operation
                one call of the wire
    wire        how batches of single-slot commands reach Redis: one pipelined write (one
                server, Sentinel's primary) or one cluster pipeline per slot (Cluster)
    pool        the connection pool packing commands in C, and a lean pipeline
    breaker     the circuit breaker, per-operation timeout and bound on operations at once
    keys        the key layout: a session's slot, one slot per output, 8 shards of events
    codec       stored values, the Lua scripts and reading replies of either shape
    facts       learned facts: one hash per tenant (or session), an atomic add with dedupe
    events      the sharded events stream read back in id order
    admin       the operator's reads: session listings, one session

May import the foundation, the settings (the store URL) and redis-py; nothing of another adapter.
"""
