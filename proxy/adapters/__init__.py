"""Adapters: the I/O behind the ports (`proxy.ports`), one room per backend.

    redis/          `StateStore` on Redis: pool, breaker, keys, scripts, the operator's reads
    memory/         the embedded `StateStore` (`memory://`): sessions, outputs, events, files
    upstream/       the `Upstream` port: OpenAI-compatible and Anthropic Messages over one
                    HTTP transport with one timeout policy
    workspace       `WorkspaceSource` over the tenant's bootstrap files, re-read on change
    workspace_paths which paths of a workspace may be opened (confinement)
    summarizer      `Summarizer` through the official SDKs, imported on the first summary

Network libraries are imported here and in the server only. An adapter may import the
foundation, settings and translate/; never the engine, compaction, the server or another
adapter's room. A new backend (a Redis Cluster store) is a new module in its room.
"""
