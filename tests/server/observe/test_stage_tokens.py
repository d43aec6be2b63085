"""`proxy.server.observe.stage_tokens`: prompt tokens before and after each stage, estimated."""

from __future__ import annotations

from proxy.compaction.compactor import CompactionOutcome
from proxy.server.observe.stage_tokens import stage_tokens
from proxy.types import StageReport, StoredCompaction
from proxy.usage import Usage
from tests.factories import make_trace

PIPELINE = (
    StageReport("compact", {"messages_before": 9, "messages_after": 9}),
    StageReport("budgets", {"chars_saved": 800, "truncated": 1}),
    StageReport("prune", {"chars_pruned": 4000, "pruned": 2}),
    StageReport("bootstrap", {"static_chars": 300, "dynamic_chars": 100, "sections": 3}),
    StageReport("cache", {"static_chars": 300}),
    StageReport("validate"),
)


def test_tokens_walk_back_from_the_upstreams_count_through_each_stages_characters() -> None:
    tokens = stage_tokens(make_trace(*PIPELINE, usage=Usage(prompt_tokens=1000)))
    assert tokens == {"budgets": (2100, 1900), "prune": (1900, 900), "bootstrap": (900, 1000)}


def test_without_usage_the_body_sent_is_the_anchor() -> None:
    tokens = stage_tokens(make_trace(*PIPELINE, bytes_out=8000))
    assert tokens["bootstrap"] == (1900, 2000) and tokens["budgets"][0] == 3100


def test_stages_that_changed_nothing_give_no_tokens() -> None:
    assert (
        stage_tokens(
            make_trace(
                StageReport("prune", {"chars_pruned": 0}),
                StageReport("cache"),
                usage=Usage(prompt_tokens=50),
            )
        )
        == {}
    )


def test_compaction_in_the_request_follows_pruning_and_counts_beyond_the_applied_one() -> None:
    stored = StoredCompaction(prefix_hash="h", covers=6, replacement=(), saved_chars=30_000)
    outcome = CompactionOutcome(status="done", reason="compacted", messages=(), compaction=stored)
    reports = (
        StageReport("compact", {"applied": 1, "chars_removed": 10_000}),
        StageReport("prune", {"chars_pruned": 400}),
        StageReport("bootstrap", {"static_chars": 400}),
    )
    tokens = stage_tokens(make_trace(*reports, usage=Usage(prompt_tokens=2000), compaction=outcome))
    assert list(tokens) == ["compact", "prune", "compaction", "bootstrap"]
    assert tokens["bootstrap"] == (1900, 2000)
    assert tokens["compaction"] == (6900, 1900)  # 20,000 characters beyond the applied summary
    assert tokens["prune"] == (7000, 6900) and tokens["compact"] == (9500, 7000)
