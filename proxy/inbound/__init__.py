"""The inbound edges: a client's API shape ⇄ the internal form the pipeline works on (pure).

The internal form is one chat-completions body: whatever API a client speaks, the stages see
`system`/`user`/`assistant`/`tool` messages, and the edge converts back losslessly — what no stage
touched leaves exactly as it came. What the chat form cannot hold waits in a side table, a
`Carrier`; `splice` pairs prepared messages with the client's.

Shared: splice (pairing, re-rendering a changed message), chat_request
(the prepared body → a chat upstream's request), result_images (the images of the client's tool
results, which a chat upstream gets in a user message), chat_stream (reading a chat upstream's
stream for messages_stream and responses_stream).

A Messages request meets: messages_session (its session id) → messages_request (body → internal
body + `Carrier`; blocks, carrier) → [the pipeline] → messages_render and messages_turns (an
Anthropic upstream's body) or chat_request; back: messages_response and messages_stream (an
OpenAI upstream's answer → Messages), messages_events (an Anthropic upstream's stream passed on
whole events at a time), messages_usage, client_usage (usage rescaled to the client's history),
messages_errors (Anthropic's shape).

A Responses request meets: responses_session (Codex's headers) → responses_previous
(`previous_response_id` expanded) → compaction_handle and responses_compaction (the signed
compaction item) → responses_check → responses_request (items, carrier) → [the pipeline] →
responses_render and responses_input (a Responses upstream's body) or chat_request; back:
responses_response, responses_stream and responses_events (a chat upstream's answer → a Response
and its events), responses_usage, responses_errors; usage_report (`report_usage = "client"`).

May import the foundation (`proxy.types`, `proxy.sse`, `proxy.usage`, `proxy.errors`,
`proxy.content`, `proxy.identity`) and `proxy.translate`; never aiohttp, Redis or an SDK.
"""
