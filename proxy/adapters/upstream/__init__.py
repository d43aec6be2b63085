"""Upstreams: the `Upstream` port, a final chat-completions body sent to a provider.

    openai_chat         any OpenAI-compatible `/chat/completions` (and `/responses`, the
                        `ResponsesUpstream` port): the body as is, bytes back
    anthropic_messages  Anthropic's Messages API, translated both ways (`proxy.translate`); and
                        `send_messages`, a Messages body as it is and the answer untouched
                        (a Messages client's request, `proxy.server.messages`)
    transport           the one HTTP transport: opening with one timeout policy, a single
                        retry before the first byte, reading with bounded silences; a JSON
                        body POSTed, its answer back untouched as the port's reply
    headers             which headers cross the proxy, in each direction

May import the foundation, settings, translate/ and aiohttp; nothing of another adapter.
"""
