"""Stages: pure message transforms, one module each, in pipeline order (`proxy.engine.pipeline`).

    budgets       cap every tool result: persist the largest, cut error and command output
    error_pattern recognising error output in a tool result, fast (budgets' rule 3), with a memo
    prune         shorten old tool results, with sticky decisions; owns the truncation marker
    bootstrap     the workspace's identity, rules, profile and memory in the system prompt
    cache         render the final draft as the outgoing body; Anthropic cache breakpoints
    marker        one message's content as parts and the `cache_control` marker on it
    validate      pre-flight: tool pairing, late system messages, marker count; ours repaired

The stored-summary stage lives with the rest of compaction (`proxy.compaction.stored`). A stage
is a frozen `<Stage>Settings` plus pure functions over JSON-shaped dicts: no I/O, no clock of its
own (the `Turn` carries one). May import the foundation only: never the engine, compaction, an
adapter, the server or a network library; siblings only as helpers (`marker`, `error_pattern`).
"""
