"""The per-request recall index: what was cut, and each cut item's original by ref."""

from __future__ import annotations

import copy

from proxy.recall.index import build_index, cut_kinds, has_cut, message_text
from proxy.recall.refs import recall_clause, summary_line
from proxy.types import Message
from tests.factories import assistant, call, system, tool, user

LOG = "\n".join(f"{i:05d} log line" for i in range(2_000))
OID = "ab" * 16


def pruned(text: str, ref: str) -> str:
    clause = recall_clause(ref, tool_name="ctx_recall")
    return f"{text[:200]}...(truncated, original: {len(text)} chars; {clause})"


def block(text: str, oid: str = OID) -> str:
    return (
        f'<persisted-output id="{oid}" chars="{len(text)}">\n'
        f"Output too large ({len(text)} chars), stored in full: GET /v1/ctx/outputs/{oid}; "
        f'full text: ctx_recall(ref="{oid}")\n'
        f"Preview (first 100 bytes):\n{text[:100]}\n</persisted-output>"
    )


def conversation() -> list[Message]:
    return [
        system("client rules"),
        user("the task"),
        assistant(None, call("call_1")),
        tool("call_1", LOG),
        assistant(None, call("call_2")),
        tool("call_2", "short"),
        assistant(None, call("call_3")),
        tool("call_3", LOG.upper()),
        user("go on"),
    ]


def prepared_of(client: list[Message], edits: dict[int, str]) -> list[Message]:
    """The client's messages as they go upstream: a bootstrap system message, `edits` applied
    (index → new tool content), the other messages the very same objects."""
    out = [system("bootstrap\n\nclient rules")]
    for index, message in enumerate(client[1:], start=1):
        out.append({**message, "content": edits[index]} if index in edits else message)
    return out


def test_nothing_cut_gives_no_kinds_and_an_empty_index() -> None:
    client = conversation()
    prepared = prepared_of(client, {})
    assert cut_kinds(client, prepared, covers=0) == frozenset()
    assert build_index(client, prepared, covers=0, tool_name="ctx_recall").empty


def test_a_pruned_and_a_persisted_result_are_recalled_by_id_and_output_id() -> None:
    client = conversation()
    before = copy.deepcopy(client)
    prepared = prepared_of(client, {3: pruned(LOG, "call_1"), 7: block(LOG.upper())})
    assert cut_kinds(client, prepared, covers=0) == {"result", "output"}
    index = build_index(client, prepared, covers=0, tool_name="ctx_recall")
    assert index.resolve("call_1").item == ("call_1", "result", LOG)
    assert index.resolve("call_3").item == ("call_3", "result", LOG.upper())
    assert index.resolve(OID).item == (OID, "output", LOG.upper())
    assert index.resolve("call_2").item is None  # not cut
    assert [ref for ref, _ in index.documents()] == ["call_1", "call_3"]
    assert client == before


def test_a_result_in_parts_is_recalled_as_its_text_parts_joined() -> None:
    client = conversation()
    client[3] = tool("call_1", [{"type": "text", "text": LOG}, {"type": "text", "text": "end"}])
    prepared = prepared_of(client, {3: pruned(LOG, "call_1")})
    index = build_index(client, prepared, covers=0, tool_name="ctx_recall")
    assert index.resolve("call_1").item == ("call_1", "result", LOG + "\nend")


def summarized(client: list[Message], covers: int) -> list[Message]:
    """Upstream messages after a compaction replaced the first `covers` history messages."""
    line = summary_line(0, covers - 1, tool_name="ctx_recall")
    summary = f"[Conversation summary]\nwork was done\n{line}"
    return [system("bootstrap"), user(summary), *client[1 + covers :]]


def test_a_summary_span_is_recalled_as_a_transcript_and_each_message_alone() -> None:
    client = conversation()
    prepared = summarized(client, 6)
    assert cut_kinds(client, prepared, covers=6) == {"summary"}
    index = build_index(client, prepared, covers=6, tool_name="ctx_recall")
    span = index.resolve("turns:0-5").item
    assert span is not None and span.text is not None
    assert span.text.startswith("[#0 user]\nthe task\n\n[#1 assistant]\n[call bash call_1] {}")
    assert LOG in span.text
    assert index.resolve("turns:0-0").item == ("turns:0-0", "summary", "the task")
    assert index.resolve("call_1").item == ("call_1", "summary", LOG)  # replaced: by its id
    assert index.resolve("turns:0-9").item is None  # past the history
    chars = sum(len(message_text(m)) for m in client[1:7])
    assert index.listing()[0] == ("turns:0-5", "summary", chars)


def test_results_after_the_summary_line_up_by_position() -> None:
    client = conversation()
    prepared = summarized(client, 5)  # keeps call_3's exchange
    prepared[3] = {**prepared[3], "content": pruned(LOG.upper(), "call_3")}
    index = build_index(client, prepared, covers=5, tool_name="ctx_recall")
    assert index.resolve("call_3").item == ("call_3", "result", LOG.upper())
    assert index.resolve("call_1").item == ("call_1", "summary", LOG)


def test_an_output_only_the_summary_names_is_left_to_the_store() -> None:
    client = conversation()
    prepared = summarized(client, 6)
    prepared[1] = user(prepared[1]["content"] + f'\nsee ctx_recall(ref="{OID}")')
    index = build_index(client, prepared, covers=6, tool_name="ctx_recall")
    assert index.stored == (OID,)
    assert index.resolve(OID).item is None
    assert (OID, "output", -1) in index.listing()


def test_an_id_answering_several_cut_results_is_ambiguous_and_each_keeps_its_position() -> None:
    client = conversation()
    client[7] = tool("call_1", LOG.upper())  # a client that reuses ids
    prepared = prepared_of(client, {3: pruned(LOG, "call_1"), 7: pruned(LOG.upper(), "call_1")})
    index = build_index(client, prepared, covers=0, tool_name="ctx_recall")
    found = index.resolve("call_1")
    assert found.item is None
    assert [c.ref for c in found.candidates] == ["turns:2-2", "turns:6-6"]
    assert index.resolve("turns:6-6").item == ("turns:6-6", "result", LOG.upper())


def test_histories_that_do_not_line_up_index_nothing_rather_than_fail() -> None:
    client = conversation()
    index = build_index(client, [system("x")], covers=0, tool_name="ctx_recall")
    assert index.empty
    assert cut_kinds(client, [system("x")], covers=99) == frozenset()


def test_message_text_shows_calls_and_non_text_parts() -> None:
    message = assistant("thinking", call("c1", "read", {"path": "a.py"}))
    assert message_text(message) == 'thinking\n[call read c1] {"path": "a.py"}'
    image = {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url"}]}
    assert message_text(image) == "see\n[image_url]"


def test_has_cut_answers_as_cut_kinds_does() -> None:
    client = [system("s"), user("go"), assistant(None, call("c1")), tool("c1", LOG)]
    assert has_cut(client, client, covers=0) is False
    prepared = [*client[:3], tool("c1", pruned(LOG, "c1"))]
    assert has_cut(client, prepared, covers=0) is True
    assert has_cut(client, client, covers=2) is True
    assert has_cut(client, [system("x")], covers=99) is False
