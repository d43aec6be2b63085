"""The server: the thin aiohttp layer (STYLE rule 6). `create_app` is the one factory.

Modules, in the order a request meets them:

    app            `create_app`: routes, middlewares and every app-scoped resource, built once;
                   factories: the concrete adapters; parser_errors: aiohttp's own 400s
    appkeys        typed app keys, the app's `Services` and one request's `RequestScope`
    middlewares    the request id, the header bound, the one error boundary; access: its line
    keys           bearer tokens → tenants
    chat           `POST /v1/chat/completions`, top to bottom: body, session, turn, prepare and
                   forward (the overflow retry, the recall loop), relay, after-work
    recall_loop    the rounds of one answer when the model calls the recall tool, in a
                   wire form of recall_dialects (chat completions, the Messages API)
    messages       `POST /v1/messages` and `/v1/messages/count_tokens` (the Anthropic Messages
                   API inbound), the same steps over `proxy.inbound`'s internal form;
                   messages_forward: prepare, send, the recall loop; messages_relay: answers
    body           reading and checking a chat body in one walk
    responses      `POST /v1/responses` (Codex, the Agents SDK); responses_body, _records (kept
                   responses, handles), _compact (the compaction contract), _relay, _streams
    keepalive      SSE comments while a slow preparation runs
    relay          writing to the client, a whole answer, the in-band error; stream_relay: a
                   stream, event by event
    passthrough    every other `/v1/*` path, untouched; prewarm: the cache after a compaction
    admin          health, readiness, metrics, outputs, sessions, events; memory_view: facts
    runner         serving on one socket, draining; workers: `serve --workers N`, one socket
    observe/       what a request did, told to the metrics and the events

An inbound API gets a route module beside `chat`, converting its request to the internal form
(`proxy.inbound`) and back. May import every floor below; only `app` and `factories` wire
concrete adapters.
"""
