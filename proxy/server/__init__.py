"""The server: the thin aiohttp layer (STYLE rule 6). `create_app` is the one factory.

Modules, in the order a request meets them:

    app          `create_app`: routes, middlewares and every app-scoped resource, built once
    factories    the concrete adapters, built from settings
    appkeys      typed app keys, the app's `Services` and one request's `RequestScope`
    middlewares  the request id, the header bound and the one error boundary
    keys         bearer tokens → tenants
    chat         `POST /v1/chat/completions`: parse, turn, pipeline, forward, relay
    body         reading and checking a chat body; body_scan: its depth and cache markers
    exchange     one chat request's way to the upstream (overflow retry included)
    keepalive    SSE comments while a slow pipeline runs, and the in-band upstream error
    relay        a whole answer relayed; stream_relay: a stream relayed event by event
    passthrough  every other `/v1/*` path, untouched
    admin        health, readiness, persisted outputs, sessions and events views
    access       the access line of each request; runner: serving on one socket, draining
    workers      `serve --workers N`: a parent forking N workers on one socket
    observe/     what a request did, told to the metrics and the events

An inbound API (Anthropic Messages, Responses) gets a route module beside `chat`, converting
its request to the internal form and back; a tool loop around the upstream call (recall) goes
in `exchange`. May import every floor below; only `app` and `factories` wire concrete adapters.
"""
