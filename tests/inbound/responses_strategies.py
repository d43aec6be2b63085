"""Hypothesis strategies for Responses API request bodies: every item and part the edge converts,
the ones it only carries, and item types nobody knows yet."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.inbound.strategies import payloads, words

JSON = dict[str, Any]

call_ids = st.text(alphabet="abcdef0123456789", min_size=3, max_size=6).map(lambda s: f"call_{s}")
input_text = st.builds(lambda t: {"type": "input_text", "text": t}, words)
output_text = st.builds(lambda t: {"type": "output_text", "text": t, "annotations": []}, words)
images = st.one_of(
    st.builds(
        lambda u, d: {
            "type": "input_image",
            "image_url": f"https://x.example/{u}.png",
            "detail": d,
        },
        words,
        st.sampled_from(["auto", "low", "high", "original"]),
    ),
    st.builds(lambda f: {"type": "input_image", "file_id": f"file-{f}", "detail": "auto"}, words),
)
files = st.one_of(
    st.builds(
        lambda d: {
            "type": "input_file",
            "file_data": f"data:application/pdf;base64,{d}",
            "filename": "a.pdf",
        },
        words,
    ),
    st.builds(lambda f: {"type": "input_file", "file_url": f"https://x.example/{f}.pdf"}, words),
)
unknown_parts = st.builds(lambda k, p: {"type": f"future_{k}", "payload": p}, words, payloads)
user_parts = st.one_of(input_text, images, files, unknown_parts)


@st.composite
def messages(draw: st.DrawFn) -> JSON:
    role = draw(st.sampled_from(["user", "user", "developer", "system", "assistant"]))
    if draw(st.integers(0, 3)) == 0:
        content: Any = draw(st.one_of(words, st.just("")))
    elif role == "assistant":
        refusal = st.builds(lambda t: {"type": "refusal", "refusal": t}, words)
        content = draw(st.lists(st.one_of(output_text, refusal), max_size=3))
    elif role == "user":
        content = draw(st.lists(user_parts, max_size=4))
    else:
        content = draw(st.lists(input_text, max_size=2))
    item: JSON = {"role": role, "content": content}
    if draw(st.booleans()):
        item = {"type": "message", **item}
    if role == "assistant" and draw(st.booleans()):
        item.update(id="msg_" + draw(words), status="completed")
    if draw(st.integers(0, 9)) == 0:
        item["x_future_key"] = draw(payloads)
    return item


function_calls = st.builds(
    lambda i, n, a, s: {
        "type": "function_call",
        "call_id": i,
        "name": n,
        "arguments": a,
        "id": f"fc_{s}",
        "status": "completed",
    },
    call_ids,
    st.sampled_from(["shell", "read", "update_plan"]),
    st.sampled_from(['{"command":"ls"}', "{}", '{"path":"é😀"}', "not json"]),
    words,
)
custom_calls = st.builds(
    lambda i, t: {"type": "custom_tool_call", "call_id": i, "name": "apply_patch", "input": t},
    call_ids,
    words,
)
outputs = st.builds(
    lambda i, o: {"type": "function_call_output", "call_id": i, "output": o},
    call_ids,
    st.one_of(words, st.just(""), st.lists(st.one_of(input_text, images), max_size=3)),
)
custom_outputs = st.builds(
    lambda i, o: {"type": "custom_tool_call_output", "call_id": i, "output": o}, call_ids, words
)
reasoning = st.builds(
    lambda s, e: {
        "type": "reasoning",
        "id": f"rs_{s}",
        "summary": [{"type": "summary_text", "text": s}],
        "encrypted_content": e,
    },
    words,
    words,
)
carried = st.one_of(
    st.builds(
        lambda s: {
            "type": "web_search_call",
            "id": f"ws_{s}",
            "status": "completed",
            "action": {"type": "search", "query": s},
        },
        words,
    ),
    st.builds(lambda s: {"type": "item_reference", "id": f"msg_{s}"}, words),
    st.builds(
        lambda s: {"type": "compaction", "id": f"cmp_{s}", "encrypted_content": f"gAAAAA{s}"}, words
    ),
    st.builds(lambda k, p: {"type": f"future_{k}", "payload": p}, words, payloads),
    st.just({"type": "compaction_trigger"}),
)
items = st.one_of(
    messages(), function_calls, custom_calls, outputs, custom_outputs, reasoning, carried
)

tools = st.one_of(
    st.builds(
        lambda n: {
            "type": "function",
            "name": n,
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        },
        st.sampled_from(["shell", "read"]),
    ),
    st.just(
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Edit files.",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
        }
    ),
    st.just({"type": "web_search"}),
    st.just({"type": "local_shell"}),
)
EXTRA_KEYS = (
    "store", "metadata", "include", "truncation", "prompt_cache_key", "max_output_tokens",
    "temperature", "top_p", "stream", "service_tier", "parallel_tool_calls", "user",
    "context_management", "x_future_parameter",
)  # fmt: skip


@st.composite
def bodies(draw: st.DrawFn) -> JSON:
    """A Responses request body: any mix of the items above, and keys beside `input`."""
    out: JSON = {"model": "gpt-5-codex"}
    if draw(st.integers(0, 5)) == 0:
        out["input"] = draw(words)
    else:
        out["input"] = draw(st.lists(items, max_size=8))
    instructions = draw(st.one_of(st.none(), words, st.just("")))
    if instructions is not None:
        out["instructions"] = instructions
    if draw(st.booleans()):
        out["tools"] = draw(st.lists(tools, max_size=3))
        out["tool_choice"] = draw(
            st.sampled_from(["auto", "required", "none", {"type": "function", "name": "shell"}])
        )
    if draw(st.booleans()):
        out["reasoning"] = {"effort": draw(st.sampled_from(["low", "high"])), "summary": "auto"}
    if draw(st.booleans()):
        out["text"] = {"verbosity": "low"}
    for key, value in draw(
        st.dictionaries(st.sampled_from(EXTRA_KEYS), payloads, max_size=3)
    ).items():
        out[key] = value
    return out
