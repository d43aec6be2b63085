"""The engine: what runs one request's context, in call order. No HTTP (the server calls it).

    engine      `ContextEngine`: load the `Turn` (state, workspace, clock, model window), match
                the stored compactions once, run the stages, compact when due, render, persist
                the outputs, record the session
    pipeline    a tenant's `Stack` of stages (built once at start-up), the runner, render and
                pre-flight validation, fail-open at every step
    memo        per-tenant memos of history hashes: lineages, derived session ids, which stored
                compaction a history begins with
    job         the `CompactionJob` a request hands the compactor (its cut, prefix body, the
                facts its model knows)
    offer       whether the outgoing request offers the recall tool (`proxy.recall`)
    prepared    what `prepare` hands back (`Prepared`) and its stage reports summed (`Tally`)
    record      what a request reads from its session's state and writes back to it
    miss        the cache facts recorded per request, and why the cache reads fell (the cause)

May import the foundation, stages/, recall/, compaction/ and settings; never an adapter, the
server or a network library: the store, workspace and compactor come in through ports.
"""
