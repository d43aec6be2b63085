"""The embedded store: `StateStore` in one process (`store.url = "memory://"`), the zero-setup
default, with the Redis store's contract.

    store       `MemoryStore`, the port's methods over the parts below
    sessions    sessions by tenant and id, their expiry and sweep, one session's record and views
    outputs     persisted tool outputs within a TTL and a size budget
    events      the bounded ring of events and its readers
    archive     archives and snapshots as files in the tenant's workspace
    records     the Responses edge's records (responses served, summaries behind handles)
    facts       learned facts: a ledger per tenant (or session), a file in the workspace
    files       a file replaced whole, stale files swept (for archive and facts)

May import the foundation only (files through `pathlib`, in worker threads).
"""
