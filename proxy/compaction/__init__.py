"""Compaction: everything about summarizing a history (DESIGN §3 Compaction).

Modules, in the order a request meets them:

    policy      `CompactSettings` and when a conversation is due (thresholds)
    stored      stored compactions: made from a cut, applied to the requests that follow (the
                "apply stored compaction" stage)
    trigger     when a request compacts: now, in the background (async mode), or not at all
    job         what one compaction is given (`CompactionJob`), the history it yields, and
                what it ends in (`CompactionOutcome`)
    compactor   the async shell: lock, archive, one summarizer call, fenced save; background
                tasks
    writeback   the facts the summarizer answered with, kept beside the summary (memory)
    plan        where the history is cut and what replaces it (summary, preserved tool output)
    prompt      the summarizer's request and the reading of its answer
    prewarm     after a background compaction, the request that warms the provider cache

Pure but for `compactor`, `writeback` and `trigger`, which reach the store and the summarizer
only through ports (`proxy.ports`). May import the foundation (memory/ included) and stages/;
never the engine, an adapter, the server or a network library.
"""
