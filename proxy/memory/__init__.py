"""Memory: the durable facts a compaction learns, kept beyond the session (issue 19).

Answers: what a learned fact looks like, how it is read from the summarizer's answer, when two
facts are one, which facts are kept and how they join the workspace's memory index.

Modules, in the order a compaction meets them:

    block       the `<memory>` block: the instruction that asks for it, reading it from an
                answer, taking it out of the summary
    fact        one fact line `- YYYY-MM-DD: text`: sanitised, bounded, its normalised key
    ledger      `MemorySettings`; `FactLedger`, the facts kept in order, once each, capped
    index       the facts in the bootstrap's `<memory_index>` after the workspace's own, and
                as Markdown to merge into `memory/MEMORY.md`

A foundation room (floor 0, like the wire formats it holds): pure, imports only the foundation
modules (`proxy.types`, `proxy.errors`), so the bootstrap stage, compaction, the stores and the
CLI all read and write facts the same way. No I/O, no clock: the caller gives the date.
"""
