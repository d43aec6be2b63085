"""Translate: pure wire translation between OpenAI chat completions and Anthropic Messages.

Modules, in the order a request meets them:

    anthropic_request   a chat-completions body → a Messages request
    anthropic_blocks    message contents ⇄ Messages content blocks (text, images, tool use/result)
    anthropic_tools     tool definitions and tool choice
    anthropic_response  a Messages answer (or error) → a chat completion (or OpenAI error)
    anthropic_stream    Messages stream events → chat-completion chunks, as they arrive
    tool_images         a chat request whose tool results had images: notes, and the images
                        in a user message after the tool messages (chat upstreams), or the
                        images in the tool messages themselves (Anthropic's tool_result)

An inbound API (Messages, Responses) adds its own modules here: its request to the internal
chat-completions form and back, losslessly. May import the foundation only; no I/O.
"""
