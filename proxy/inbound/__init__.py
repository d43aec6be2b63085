"""The inbound edges: a client's API shape ⇄ the internal form the pipeline works on (pure).

The internal form is one chat-completions body (`proxy.types`): whatever API a client speaks, the
stages see `system`/`user`/`assistant`/`tool` messages, and the edge converts back losslessly —
what no stage touched leaves exactly as it came. Modules, in the order a Messages request meets
them:

    messages_session   the session id a Messages client names (header, `metadata.user_id`)
    messages_request   a Messages body → the internal body + its `Carrier` (request checks too)
    messages_blocks    one Anthropic block ⇄ one chat content part or tool call
    messages_carrier   the `Carrier`: where each internal message came from
    messages_render    the prepared internal body + carrier → the Messages body (Anthropic upstream)
    messages_turns     … its `messages`: untouched turns as sent, changed ones re-rendered
    messages_splice    … pairing prepared messages with client ones; re-rendering one around
                       the blocks it carries
    chat_request       the prepared internal body → an OpenAI upstream's request
    messages_response  an OpenAI upstream's JSON answer → a Messages answer
    messages_stream    an OpenAI upstream's SSE → the Messages event stream, incrementally
    messages_usage     usage read from an Anthropic upstream's answer or stream
    messages_events    an Anthropic upstream's stream on its way to the client: whole events
                       as they came, usage read, its end and errors seen
    client_usage       usage rescaled to the client's full history (`report_usage = "client"`)
    messages_errors    errors in Anthropic's shape, with Anthropic's statuses

May import the foundation (`proxy.types`, `proxy.sse`, `proxy.usage`, `proxy.errors`,
`proxy.content`, `proxy.identity`) and `proxy.translate`; never aiohttp, Redis or an SDK.
"""
