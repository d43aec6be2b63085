"""The summarizer's request (reusing the conversation's prefix, or as a plain transcript) and the
reading of its answer."""

from __future__ import annotations

import copy

import pytest

from proxy.compaction.policy import OUTPUT_RESERVE_TOKENS, CompactSettings
from proxy.compaction.prompt import (
    MEMORY_OUTPUT_TOKENS,
    build_summary_body,
    build_transcript_body,
    extract_summary,
    summary_instruction,
)
from proxy.memory.block import MEMORY_INSTRUCTION
from proxy.types import JSON, Message
from tests.factories import assistant, call, exchange, system, tool, user

SETTINGS = CompactSettings()


def test_summary_body_reuses_the_prefix_then_asks_once() -> None:
    prefix = {
        "model": "gpt-4o",
        "messages": [system("sys"), user("My name is Ada; invoice 4711 is due 2024-05-01.")],
        "tools": [{"type": "function", "function": {"name": "bash"}}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "response_format": {"type": "json_object"},
        "prompt_cache_key": "k",
    }
    snapshot = copy.deepcopy(prefix)
    body = build_summary_body(prefix, settings=CompactSettings(max_summary_words=300), model="m")
    assert prefix == snapshot
    assert body["messages"][:2] == prefix["messages"]
    assert body["tools"] == prefix["tools"] and body["prompt_cache_key"] == "k"
    assert len(body["messages"]) == 3 and body["messages"][-1]["role"] == "user"
    instruction = body["messages"][-1]["content"]
    assert "<analysis>" in instruction and "<summary>" in instruction and "300 words" in instruction
    assert body["tool_choice"] == "none" and body["stream"] is False and body["model"] == "m"
    assert "stream_options" not in body and "response_format" not in body
    assert 0 < body["max_tokens"] <= 20_000


def test_summary_body_uses_the_configured_model_and_reasoning_token_limit() -> None:
    settings_ = CompactSettings(summarizer_model="o4-mini")
    body = build_summary_body({"messages": [user("x")]}, settings=settings_, model="gpt-4o")
    assert body["model"] == "o4-mini" and "max_completion_tokens" in body
    assert "tool_choice" not in body and "max_tokens" not in body


def test_transcript_body_carries_every_message_as_text() -> None:
    messages = [user("deploy to eu-west-3"), *exchange("c1", "exit 0", name="deploy")]
    body = build_transcript_body(messages, settings=SETTINGS, model="gpt-4o")
    text = "\n".join(m["content"] for m in body["messages"])
    assert "eu-west-3" in text and "deploy" in text and "exit 0" in text
    assert body["stream"] is False and "tools" not in body


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<analysis>think</analysis>\n<summary>\nfacts\n</summary>", "facts"),
        ("<analysis>think</analysis><summary>cut off", "cut off"),
        ("plain answer", "plain answer"),
        ("<analysis>only thinking</analysis> the rest", "the rest"),
        ("<summary>a</summary> <summary>b</summary>", "b"),
        ("", ""),
    ],
)
def test_extract_summary_keeps_only_the_summary(text: str, expected: str) -> None:
    assert extract_summary(text) == expected


@pytest.mark.parametrize("words", [1, 300, 2_000])
def test_summary_instruction_asks_for_analysis_then_a_summary_of_at_most_the_words(
    words: int,
) -> None:
    instruction = summary_instruction(max_words=words)
    assert f"at most {words} words" in instruction
    assert instruction.index("<analysis></analysis>") < instruction.index("<summary></summary>")
    assert "conversation above" in instruction and "Do not call any tool" in instruction


@pytest.mark.parametrize(
    ("model", "summarizer_model", "words", "limit"),
    [
        ("gpt-4o", None, 500, {"max_tokens": 3_024}),
        ("gpt-4.1", None, 100, {"max_tokens": 1_424}),
        ("gpt-4o", None, 5_000, {"max_tokens": OUTPUT_RESERVE_TOKENS}),
        ("o3-mini", None, 500, {"max_completion_tokens": 11_216}),
        ("openai/gpt-5", None, 500, {"max_completion_tokens": 11_216}),
        ("O1-preview", None, 500, {"max_completion_tokens": 11_216}),
        ("gpt-5", None, 5_000, {"max_completion_tokens": OUTPUT_RESERVE_TOKENS}),
        ("my-o3", None, 500, {"max_tokens": 3_024}),
        ("o4-mini", "gpt-4o", 500, {"max_tokens": 3_024}),
        ("gpt-4o", "o4-mini", 500, {"max_completion_tokens": 11_216}),
    ],
)
def test_both_bodies_leave_room_for_analysis_and_summary_by_the_chosen_model(
    model: str, summarizer_model: str | None, words: int, limit: dict[str, int]
) -> None:
    settings = CompactSettings(summarizer_model=summarizer_model, max_summary_words=words)
    chosen = summarizer_model or model
    bodies = (
        build_summary_body({"messages": [user("x")]}, settings=settings, model=model),
        build_transcript_body([user("x")], settings=settings, model=model),
    )
    for body in bodies:
        assert body["model"] == chosen
        assert {k: body[k] for k in ("max_tokens", "max_completion_tokens") if k in body} == limit


@pytest.mark.parametrize(
    ("prefix", "kept"),
    [
        ({"messages": [user("q")]}, {}),
        (
            {"messages": [user("q")], "user": "u1", "prompt_cache_key": "k"},
            {"user": "u1", "prompt_cache_key": "k"},
        ),
        ({"messages": [user("q")], "tools": []}, {"tools": []}),
        (
            {"messages": [user("q")], "temperature": 0.2, "max_tokens": 9, "n": 2, "stop": ["x"]},
            {},
        ),
        ({"messages": [user("q")], "stream": True, "x-unknown": 1}, {}),
    ],
)
def test_summary_body_keeps_only_the_keys_that_shape_the_prefix(prefix: JSON, kept: JSON) -> None:
    before = copy.deepcopy(prefix)
    body = build_summary_body(prefix, settings=SETTINGS, model="gpt-4o")
    assert prefix == before
    assert {
        k: v for k, v in body.items() if k not in ("model", "messages", "max_tokens", "stream")
    } == kept
    assert body["stream"] is False


def test_summary_body_without_messages_is_the_instruction_alone() -> None:
    body = build_summary_body({"model": "gpt-4o"}, settings=SETTINGS, model="gpt-4o")
    assert body["messages"] == [
        {"role": "user", "content": summary_instruction(max_words=SETTINGS.max_summary_words)}
    ]


def test_transcript_body_is_a_system_prompt_the_conversation_then_the_instruction() -> None:
    messages: list[Message] = [
        system("be brief"),
        user("deploy"),
        assistant(None, call("c1", "deploy", {"region": "eu-west-3"})),
        tool("c1", [{"type": "text", "text": "exit 0"}, {"type": "text", "text": "done"}]),
        assistant("Deployed."),
    ]
    before = copy.deepcopy(messages)
    body = build_transcript_body(messages, settings=SETTINGS, model="gpt-4o")
    assert messages == before
    first, conversation, instruction = body["messages"]
    assert first["role"] == "system" and "summarize" in first["content"]
    assert conversation == {
        "role": "user",
        "content": "<conversation>\n"
        "[system]\nbe brief\n\n"
        "[user]\ndeploy\n\n"
        '[assistant]\n(calls deploy({"region": "eu-west-3"}))\n\n'
        "[tool]\nexit 0\ndone\n\n"
        "[assistant]\nDeployed."
        "\n</conversation>",
    }
    assert instruction["role"] == "user"
    assert instruction["content"].startswith("Summarize the conversation in <conversation> so")
    assert set(body) == {"model", "messages", "max_tokens", "stream"}


@pytest.mark.parametrize(
    ("message", "rendered"),
    [
        ({"content": "hi"}, "[?]\nhi"),
        ({"role": "assistant", "content": ""}, "[assistant]"),
        (
            {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "ls"}}]},
            "[assistant]\n(calls ls())",
        ),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
            '[user]\n{"type":"image_url","image_url":{"url":"u"}}',
        ),
    ],
)
def test_transcript_renders_each_message_as_role_content_and_calls(
    message: Message, rendered: str
) -> None:
    body = build_transcript_body([message], settings=SETTINGS, model="gpt-4o")
    assert body["messages"][1]["content"] == f"<conversation>\n{rendered}\n</conversation>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<SUMMARY>Facts</Summary>", "Facts"),
        ("<Analysis>think</ANALYSIS>answer", "answer"),
        ("<analysis>cut off before any summary", ""),
        ("answer</summary>", "answer"),
        ("answer</SUMMARY>", "answer"),
        ("<summary>  \n </summary>", ""),
        ("<summary>a</summary> trailing words", "a"),
        ("<analysis>x</analysis> a <analysis>y</analysis> b", "a  b"),
    ],
)
def test_extract_summary_reads_tags_in_any_case_and_nothing_usable_as_empty(
    text: str, expected: str
) -> None:
    assert extract_summary(text) == expected


def test_with_memory_the_same_request_also_asks_for_the_memory_block() -> None:
    prefix = {"model": "gpt-4o", "messages": [system("sys"), user("q")]}
    plain = build_summary_body(prefix, settings=SETTINGS, model="gpt-4o")
    asked = build_summary_body(prefix, settings=SETTINGS, model="gpt-4o", memory=True)
    assert asked["messages"][:-1] == plain["messages"][:-1]  # the cached prefix is the same
    instruction = asked["messages"][-1]["content"]
    assert instruction == plain["messages"][-1]["content"] + " " + MEMORY_INSTRUCTION
    assert asked["max_tokens"] == plain["max_tokens"] + MEMORY_OUTPUT_TOKENS
    transcript = build_transcript_body([user("q")], settings=SETTINGS, model="gpt-4o", memory=True)
    assert transcript["messages"][-1]["content"].endswith(MEMORY_INSTRUCTION)
    assert "<memory>" not in plain["messages"][-1]["content"]


def test_the_memory_block_is_never_part_of_the_summary() -> None:
    tail = "<memory>\n- Lives in Lisbon.\n</memory>"
    assert extract_summary(f"<analysis>a</analysis><summary>S</summary>{tail}") == "S"
    assert extract_summary(f"<summary>S {tail} more") == "S  more"
    assert extract_summary(f"plain answer\n{tail}") == "plain answer"
