"""The inbound edges: a client's API shape ⇄ the internal form the pipeline works on (pure).

The internal form is one chat-completions body (`proxy.types`): whatever API a client speaks, the
stages see `system`/`user`/`assistant`/`tool` messages, and the edge converts back losslessly —
what no stage touched leaves exactly as it came. Both edges keep what the chat form cannot hold
in a side table, a `Carrier`, and pair prepared messages with the client's by `splice`.

Shared:

    splice             pairing prepared messages with the client's; re-rendering a changed one
                       around what it carries
    sse_write          one SSE event written for a client
    chat_request       the prepared internal body → a chat upstream's request

Modules, in the order a Messages request meets them:

    messages_session   the session id a Messages client names (header, `metadata.user_id`)
    messages_request   a Messages body → the internal body + its `Carrier` (request checks too)
    messages_blocks    one Anthropic block ⇄ one chat content part or tool call
    messages_carrier   the `Carrier`: where each internal message came from
    messages_render    the prepared internal body + carrier → the Messages body (Anthropic upstream)
    messages_turns     … its `messages`: untouched turns as sent, changed ones re-rendered
    messages_response  an OpenAI upstream's JSON answer → a Messages answer
    messages_stream    an OpenAI upstream's SSE → the Messages event stream, incrementally
    messages_usage     usage read from an Anthropic upstream's answer or stream
    messages_errors    errors in Anthropic's shape, with Anthropic's statuses

and a Responses request:

    responses_session    the session id a Responses client names (Codex's headers)
    responses_previous   `previous_response_id`: the record kept, the request expanded
    compaction_handle    the signed handle in a compaction item's `encrypted_content`
    responses_compaction which request asks for a compaction; the one item answering it
    responses_check      whether a body is a Responses request the edge can take (a 400 if not)
    responses_request    a Responses body → the internal body + its `Carrier`
    responses_items      one item, part or tool ⇄ one chat part, tool call or tool
    responses_carrier    the `Carrier`: the items each internal message stands for
    responses_render     the prepared body + carrier → the Responses body (Responses upstream)
    responses_input      … its `input`: untouched items as sent, changed ones re-rendered
    responses_response   a chat upstream's JSON answer → a Response
    responses_stream     a chat upstream's SSE → the Responses event stream, incrementally
    responses_events     the Responses stream events, and a finished Response replayed as them
    responses_usage      usage (and the finished Response) read from a Responses upstream
    responses_errors     the edge's own refusals, in the OpenAI error shape

May import the foundation (`proxy.types`, `proxy.sse`, `proxy.usage`, `proxy.errors`,
`proxy.content`, `proxy.identity`) and `proxy.translate`; never aiohttp, Redis or an SDK.
"""
