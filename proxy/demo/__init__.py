"""`ctxproxy demo`: the three mechanisms on a scripted agent session, offline and without a key.

    command     the `demo` command: starts the simulated upstream and the proxy in process
    play        the agent side: sends the scripted turns, runs the tools, narrates
    script      the scripted session: the user, the notes, the model's lines (data only)
    upstream    the SIMULATED upstream (an aiohttp app speaking the OpenAI wire format)

The top floor, beside `proxy.cli`: may import anything below it.
"""
