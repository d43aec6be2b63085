"""One recall call answered: arguments, item or search, and every way it can miss."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.adapters.memory_state import MemoryStore
from proxy.errors import StoreUnavailable
from proxy.recall.answer import RecallArgs, answer, answer_call, needed_outputs, parse_arguments
from proxy.recall.index import RecallIndex, build_index
from proxy.recall.tool import RecallSettings
from proxy.types import Message
from tests.factories import assistant, call, system, tool, user
from tests.recall.test_index import LOG, OID, block, pruned, summarized

SETTINGS = RecallSettings()


def args(**values: object) -> str:
    return orjson.dumps(values).decode()


def index_of(results: dict[str, str], cuts: dict[str, str]) -> RecallIndex:
    """A conversation with one tool result per id; `cuts` is what went upstream instead."""
    client: list[Message] = [system("rules"), user("task")]
    for call_id, text in results.items():
        client += [assistant(None, call(call_id)), tool(call_id, text)]
    prepared = [
        {**m, "content": cuts[m["tool_call_id"]]} if m.get("tool_call_id") in cuts else m
        for m in client
    ]
    return build_index(client, prepared, covers=0, tool_name="ctx_recall")


INDEX = index_of({"call_1": LOG, "call_2": "ok"}, {"call_1": pruned(LOG, "call_1")})


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (None, "No arguments"),
        ("", "No arguments"),
        ("{", "not a JSON object"),
        ("[1]", "not a JSON object"),
        (args(), "Pass ref"),
        (args(ref=""), "ref must be"),
        (args(ref=7), "ref must be"),
        (args(query="  "), "query must be"),
        (args(query="a\nb"), "one line"),
        (args(query="q" * 1_001), "too long"),
        (args(ref="x", offset=-1), "offset must be"),
        (args(ref="x", offset=True), "offset must be"),
        (args(ref="x", offset=1.5), "offset must be"),
    ],
)
def test_malformed_arguments_are_explained(raw: object, problem: str) -> None:
    parsed = parse_arguments(raw)
    assert isinstance(parsed, str) and problem in parsed
    result = answer(parsed, INDEX, settings=SETTINGS)
    assert result.kind == "invalid" and result.outcome == "miss"
    assert '"call_1" (tool result, 29999 chars)' in result.text  # the refs that exist


def test_arguments_are_read_leniently_where_the_meaning_is_plain() -> None:
    assert parse_arguments(args(ref=" call_1 ", offset="40")) == RecallArgs("call_1", None, 40)
    assert parse_arguments(args(query=" disk ", offset=2.0, extra=1)) == RecallArgs(None, "disk", 2)


def test_a_ref_gives_the_exact_original_page_by_page() -> None:
    small = RecallSettings(max_result_chars=20_000)
    first = answer(parse_arguments(args(ref="call_1")), INDEX, settings=small)
    assert first.kind == "ref" and first.outcome == "hit"
    body, _, note = first.text.rpartition("\n[chars ")
    assert LOG.startswith(body) and 'ctx_recall(ref="call_1", offset=' in note
    rest = answer(parse_arguments(args(ref="call_1", offset=len(body))), INDEX, settings=small)
    assert body + rest.text.rpartition("\n[chars ")[0] == LOG


def test_a_ref_with_a_query_searches_that_item_only() -> None:
    index = index_of({"a": "x\nneedle one", "b": "needle two"}, {"a": "cut a", "b": "cut b"})
    result = answer(parse_arguments(args(ref="b", query="NEEDLE")), index, settings=SETTINGS)
    assert result.kind == "query" and result.outcome == "hit"
    assert "needle two" in result.text and "needle one" not in result.text


def test_a_query_searches_everything_cut_and_names_each_ref() -> None:
    index = index_of(
        {"a": "first\nthe needle", "b": "needle again", "c": "needle, not cut"},
        {"a": "cut a", "b": "cut b"},
    )
    result = answer(parse_arguments(args(query="needle")), index, settings=SETTINGS)
    assert (result.kind, result.outcome) == ("query", "hit")
    assert 'ref="a" line 2' in result.text and 'ref="b" line 1' in result.text
    assert "not cut" not in result.text


def test_an_unknown_or_foreign_ref_is_a_miss_listing_the_refs_that_exist() -> None:
    result = answer(parse_arguments(args(ref="call_of_another_chat")), INDEX, settings=SETTINGS)
    assert (result.kind, result.outcome) == ("ref", "miss")
    assert result.text.splitlines() == [
        'No cut item has ref="call_of_another_chat" in this conversation.',
        'Refs that exist (1), each for ctx_recall(ref="REF"):',
        '- "call_1" (tool result, 29999 chars)',
    ]


def test_a_miss_in_a_conversation_with_nothing_cut_says_so() -> None:
    result = answer(parse_arguments(args(ref="x")), index_of({}, {}), settings=SETTINGS)
    assert result.text.endswith("Nothing has been cut from this conversation.")


def test_an_ambiguous_id_lists_its_candidates() -> None:
    client = [
        system("s"),
        user("t"),
        *[
            m
            for i in range(2)
            for m in (assistant(None, call("call_0")), tool("call_0", f"{i}" * 400))
        ],
    ]
    prepared = [{**m, "content": "cut"} if m.get("role") == "tool" else m for m in client]
    index = build_index(client, prepared, covers=0, tool_name="ctx_recall")
    result = answer(parse_arguments(args(ref="call_0")), index, settings=SETTINGS)
    assert result.outcome == "miss"
    assert '"turns:2-2" (tool result, 400 chars)' in result.text
    one = answer(parse_arguments(args(ref="turns:4-4")), index, settings=SETTINGS)
    assert one.text == "1" * 400


def test_a_long_listing_is_bounded() -> None:
    many = {f"call_{i}": "x" * 400 for i in range(100)}
    index = index_of(many, dict.fromkeys(many, "cut"))
    result = answer(parse_arguments(args(ref="nope")), index, settings=SETTINGS)
    assert result.text.endswith("- and 60 more; search them with query")


def summarized_index() -> RecallIndex:
    client = [system("s"), user("task"), assistant(None, call("c1")), tool("c1", LOG), user("u")]
    prepared = summarized(client, 3)
    prepared[1] = user(prepared[1]["content"] + f'\nctx_recall(ref="{OID}")')
    return build_index(client, prepared, covers=3, tool_name="ctx_recall")


async def test_an_output_only_the_store_holds_is_read_for_the_callers_tenant_only() -> None:
    store = MemoryStore()
    await store.put_output("acme", OID, "the stored output")
    await store.put_output("other", "cd" * 16, "another tenant's")
    index = summarized_index()
    assert needed_outputs(RecallArgs(ref=OID), index) == (OID,)
    hit = await answer_call(args(ref=OID), index, settings=SETTINGS, reader=store, tenant="acme")
    assert (hit.text, hit.outcome) == ("the stored output", "hit")
    elsewhere = await answer_call(
        args(ref=OID), index, settings=SETTINGS, reader=store, tenant="other"
    )
    assert elsewhere.outcome == "miss" and "no longer stored" in elsewhere.text
    foreign = await answer_call(
        args(ref="cd" * 16), index, settings=SETTINGS, reader=store, tenant="other"
    )
    assert foreign.outcome == "miss" and "No cut item" in foreign.text
    found = await answer_call(
        args(query="STORED"), index, settings=SETTINGS, reader=store, tenant="acme"
    )
    assert f'ref="{OID}" line 1' in found.text


class _DownStore:
    async def get_output(self, tenant: str, output_id: str) -> str | None:
        raise StoreUnavailable("down")


async def test_a_store_that_cannot_be_read_is_a_miss_not_an_error() -> None:
    result = await answer_call(
        args(ref=OID), summarized_index(), settings=SETTINGS, reader=_DownStore(), tenant="t"
    )
    assert result.outcome == "miss"


async def test_a_persisted_output_in_the_request_needs_no_store() -> None:
    index = index_of({"call_1": LOG}, {"call_1": block(LOG)})
    result = await answer_call(
        args(ref=OID), index, settings=SETTINGS, reader=_DownStore(), tenant="t"
    )
    assert result.outcome == "hit" and LOG.startswith(result.text.rpartition("\n[chars ")[0])


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=301, max_size=3_000))
def test_recall_by_ref_returns_the_original_for_any_text(text: str) -> None:
    index = index_of({"call_x": text}, {"call_x": text[:200] + "...(cut)"})
    result = answer(parse_arguments(args(ref="call_x")), index, settings=SETTINGS)
    assert result.text == text
