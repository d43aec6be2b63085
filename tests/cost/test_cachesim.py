"""The simulated provider caches: reads, writes, lifetimes, the 20-block lookback."""

from __future__ import annotations

import copy
from typing import Any

from proxy.cost.cachesim import AnthropicCache, CacheUse, OpenAICache, OpenAIDigests, blocks

PAD = "x" * 8000  # 2,000 tokens: over the 1,024-token minimum on its own
MARK = {"type": "ephemeral"}
MARK_1H = {"type": "ephemeral", "ttl": "1h"}


def body(*texts: str, marked: tuple[int, ...] = (), ttl: dict[str, str] = MARK) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        message: dict[str, Any] = {
            "role": "user" if index % 2 == 0 else "assistant",
            "content": text,
        }
        if index in marked:
            message["cache_control"] = dict(ttl)
        messages.append(message)
    return {"messages": messages}


def tokens_of(request: dict[str, Any]) -> list[int]:
    total, out = 0, []
    for data, _ in blocks(request):
        total += len(data) // 4
        out.append(total)
    return out


def test_a_marker_writes_its_prefix_and_the_next_request_reads_it() -> None:
    cache = AnthropicCache()
    first = body(PAD, "a", marked=(1,))
    size = tokens_of(first)[-1]
    assert cache.serve(first, now=0.0) == CacheUse(read=0, written=size, prompt=size)
    second = body(PAD, "a", "b", "c", marked=(3,))
    used = cache.serve(second, now=10.0)
    assert used.read == tokens_of(first)[-1]
    assert used.written == tokens_of(second)[-1] - used.read


def test_serving_does_not_change_the_body() -> None:
    request = body(PAD, "a", marked=(1,))
    before = copy.deepcopy(request)
    AnthropicCache().serve(request, now=0.0)
    OpenAICache().serve(request, now=0.0)
    assert request == before


def test_entries_expire_after_five_minutes_without_a_read() -> None:
    cache = AnthropicCache()
    cache.serve(body(PAD, "a", marked=(1,)), now=0.0)
    assert cache.serve(body(PAD, "a", "b", marked=(2,)), now=301.0).read == 0


def test_a_read_refreshes_the_entry() -> None:
    cache = AnthropicCache()
    cache.serve(body(PAD, "a", marked=(1,)), now=0.0)
    assert cache.serve(body(PAD, "a", marked=(1,)), now=250.0).read > 0
    assert cache.serve(body(PAD, "a", marked=(1,)), now=500.0).read > 0


def test_one_hour_markers_live_an_hour_and_count_as_one_hour_writes() -> None:
    cache = AnthropicCache()
    first = body(PAD, "a", marked=(1,), ttl=MARK_1H)
    used = cache.serve(first, now=0.0)
    assert used.written == used.written_1h == tokens_of(first)[-1]
    assert cache.serve(body(PAD, "a", "b", marked=(2,)), now=3000.0).read == used.written


def test_two_new_breakpoints_write_the_prefix_once() -> None:
    request = body(PAD, "a", PAD, "b", marked=(1, 3))
    used = AnthropicCache().serve(request, now=0.0)
    assert used.written == tokens_of(request)[-1]


def test_a_prefix_under_the_minimum_is_not_cached() -> None:
    cache = AnthropicCache()
    assert cache.serve(body("short", "a", marked=(1,)), now=0.0).written == 0
    assert cache.serve(body("short", "a", "b", marked=(2,)), now=1.0).read == 0


def test_the_lookback_reaches_20_blocks_before_a_marker_and_no_further() -> None:
    cache = AnthropicCache()
    cache.serve(body(PAD, "a", marked=(1,)), now=0.0)
    near = [PAD, "a", *("m" for _ in range(19))]
    assert cache.serve(body(*near, marked=(len(near) - 1,)), now=1.0).read > 0
    cache = AnthropicCache()
    cache.serve(body(PAD, "a", marked=(1,)), now=0.0)
    far = [PAD, "a", *("m" for _ in range(20))]
    assert cache.serve(body(*far, marked=(len(far) - 1,)), now=1.0).read == 0


def test_an_edit_before_the_cached_prefix_misses() -> None:
    cache = AnthropicCache()
    cache.serve(body(PAD, "a", PAD, "b", marked=(3,)), now=0.0)
    assert cache.serve(body(PAD, "A", PAD, "b", "c", marked=(4,)), now=1.0).read == 0


def test_openai_caches_common_prefixes_from_1024_tokens_in_128_token_steps() -> None:
    cache = OpenAICache()
    assert cache.serve(body(PAD, "a"), now=0.0).read == 0
    read = cache.serve(body(PAD, "a", "b"), now=1.0).read
    assert read >= 1024 and (read - 1024) % 128 == 0
    assert cache.serve(body("y" * 3000, "a"), now=2.0).read == 0  # 750 tokens in common at most


def test_openai_counts_the_prompt_as_the_anthropic_model_does() -> None:
    request = body(PAD, "a", "b")
    assert OpenAICache().serve(request, now=0.0).prompt == tokens_of(request)[-1]


def test_openai_prompts_expire_after_ten_minutes() -> None:
    cache = OpenAICache()
    cache.serve(body(PAD, "a"), now=0.0)
    assert cache.serve(body(PAD, "a", "b"), now=601.0).read == 0


def test_a_string_and_the_same_text_as_a_marked_part_are_the_same_block() -> None:
    """ctxproxy marks a message by turning its string into a text part; the next request sends
    the string again. The Messages API sees one text part both times: the prefix still hits."""
    cache = AnthropicCache()
    marked = body(PAD, "a")
    marked["messages"][1]["content"] = [{"type": "text", "text": "a", "cache_control": MARK}]
    written = cache.serve(marked, now=0.0).written
    assert cache.serve(body(PAD, "a", "b", marked=(2,)), now=1.0).read == written


def test_openai_digests_read_whole_shared_blocks_as_the_text_model_does() -> None:
    digests, text = OpenAIDigests(), OpenAICache()
    first, second = body(PAD, "a"), body(PAD, "a", "b")
    digests.serve(first, now=0.0)
    text.serve(first, now=0.0)
    read = digests.serve(second, now=1.0).read
    assert read == text.serve(second, now=1.0).read and read >= 1024
    assert digests.serve(body("y" * 8000, "a"), now=2.0).read == 0  # the first block differs


def test_openai_digests_keep_few_prompts_and_let_them_expire() -> None:
    cache = OpenAIDigests(keep=2)
    for number in range(5):
        cache.serve(body(PAD, str(number)), now=float(number))
    assert len(cache.prompts) == 2
    assert cache.serve(body(PAD, "9"), now=700.0).read == 0
