"""ctxproxy: a context-management proxy for LLM agents.

The house, bottom floor first (a module imports only its own floor or the ones below; the
architecture test, `tests/test_architecture.py`, walks the imports and checks it):

    foundation   types, errors, ports, content, history, identity, sse, usage, models, logs,
                 exact_json: plain data, wire formats, the seams; pure (no I/O, no network); and
                 memory/, the learned facts' formats (imports the foundation modules only)
    pure rooms   stages/ (message transforms), translate/ (wire translation), recall/ (what was
                 cut, by ref), cost/ (prices): each imports the foundation only, never another
    compaction/  everything about summarizing a history
    inbound/     each inbound API (Anthropic Messages, …) ⇄ the internal form; pure
    settings     settings, config, config_tables: the frozen settings tree and its TOML loader
    engine/      one request, in call order: load the turn → stages → compaction → render → record
    adapters/    the only I/O besides the server: Redis, the embedded store, upstreams,
                 the workspace files, the summarizer SDKs
    server/      the thin aiohttp layer: routes, relay, middlewares, admin views; observe/
    cli/ demo/   the `ctxproxy` command and its views; the offline demo (`__main__` runs the CLI)
"""

__version__ = "0.1.0"
