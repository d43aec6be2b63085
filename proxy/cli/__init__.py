"""The `ctxproxy` command.

    main        the parser and the commands: serve, keys, bootstrap preview, version
    preflight   start-up checks on the final settings (an upstream at the proxy's own address)
    sessions    `ctxproxy sessions list | show ID | watch`
    memory      `ctxproxy memory show | forget PATTERN | export`: the learned facts
    source      where sessions are read: Redis directly, or a running proxy's admin views
    view        rendering the sessions view (pure: plain data to `rich` renderables)

The top floor: may import anything below it. Heavy imports (the server, aiohttp) are made by
the command that needs them.
"""
