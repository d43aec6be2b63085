"""Hypothesis strategies for Messages API request bodies: every block type the edge converts,
the ones it only carries, and block types nobody knows yet."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

JSON = dict[str, Any]

words = st.text(alphabet="abcxyz \n{}\"'é😀", min_size=1, max_size=12)
ids = st.text(alphabet="abcdef0123456789", min_size=4, max_size=8).map(lambda s: f"toolu_{s}")
markers = st.one_of(
    st.none(), st.just({"type": "ephemeral"}), st.just({"type": "ephemeral", "ttl": "1h"})
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), words)
payloads = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(words, inner, max_size=3)),
    max_leaves=6,
)


def _with_marker(block: JSON, marker: JSON | None) -> JSON:
    return {**block, "cache_control": marker} if marker is not None else block


@st.composite
def text_blocks(draw: st.DrawFn) -> JSON:
    block: JSON = {"type": "text", "text": draw(words)}
    if draw(st.booleans()):
        block["citations"] = [{"type": "char_location", "cited_text": draw(words)}]
    return _with_marker(block, draw(markers))


sources = st.one_of(
    st.builds(lambda d: {"type": "base64", "media_type": "image/png", "data": d}, words),
    st.builds(lambda u: {"type": "url", "url": f"https://x.example/{u}"}, words),
    st.builds(lambda f: {"type": "file", "file_id": f}, words),
)
images = st.builds(lambda s, m: _with_marker({"type": "image", "source": s}, m), sources, markers)
documents = st.builds(
    lambda data, m: _with_marker(
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": data}},
        m,
    ),
    words,
    markers,
)
thinking = st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, words, words)
redacted = st.builds(lambda d: {"type": "redacted_thinking", "data": d}, words)
unknown = st.builds(
    lambda kind, payload: {"type": f"future_{kind}", "payload": payload}, words, payloads
)
server_use = st.builds(
    lambda i, q: {
        "type": "server_tool_use",
        "id": f"srv{i}",
        "name": "web_search",
        "input": {"query": q},
    },
    ids,
    words,
)
tool_uses = st.builds(
    lambda i, name, args, m: _with_marker(
        {"type": "tool_use", "id": i, "name": name, "input": args}, m
    ),
    ids,
    st.sampled_from(["Bash", "Read", "Edit"]),
    st.dictionaries(words, payloads, max_size=3),
    markers,
)
result_content = st.one_of(
    st.none(), words, st.just(""), st.lists(st.one_of(text_blocks(), images), max_size=3)
)


@st.composite
def tool_results(draw: st.DrawFn) -> JSON:
    block: JSON = {"type": "tool_result", "tool_use_id": draw(ids)}
    content = draw(result_content)
    if content is not None:
        block["content"] = content
    if draw(st.booleans()):
        block["is_error"] = draw(st.booleans())
    return _with_marker(block, draw(markers))


user_blocks = st.one_of(text_blocks(), images, documents, tool_results(), unknown)
assistant_blocks = st.one_of(text_blocks(), thinking, redacted, tool_uses, server_use, unknown)


@st.composite
def messages(draw: st.DrawFn) -> JSON:
    role = draw(st.sampled_from(["user", "assistant"]))
    if draw(st.integers(0, 4)) == 0:
        return {"role": role, "content": draw(st.one_of(words, st.just("")))}
    kind = user_blocks if role == "user" else assistant_blocks
    message: JSON = {"role": role, "content": draw(st.lists(kind, max_size=5))}
    if draw(st.integers(0, 9)) == 0:
        message["x_future_key"] = draw(payloads)
    return message


custom_tools = st.builds(
    lambda name, m: _with_marker(
        {"name": name, "input_schema": {"type": "object", "properties": {}}}, m
    ),
    words,
    markers,
)
server_tools = st.just({"type": "web_search_20250305", "name": "web_search", "max_uses": 2})


@st.composite
def bodies(draw: st.DrawFn) -> JSON:
    """A Messages request body: any mix of the blocks above, and keys beside `messages`."""
    out: JSON = {"model": "claude-x", "messages": draw(st.lists(messages(), max_size=6))}
    system = draw(st.one_of(st.none(), words, st.lists(text_blocks(), max_size=3)))
    if system is not None:
        out["system"] = system
    if draw(st.booleans()):
        out["max_tokens"] = draw(st.integers(1, 9000))
    if draw(st.booleans()):
        out["tools"] = draw(st.lists(st.one_of(custom_tools, server_tools), max_size=3))
        choice = draw(st.sampled_from(["auto", "any", "none", "tool"]))
        out["tool_choice"] = {"type": choice, **({"name": "x"} if choice == "tool" else {})}
    for key, value in draw(
        st.dictionaries(st.sampled_from(EXTRA_KEYS), payloads, max_size=3)
    ).items():
        out[key] = value
    return out


EXTRA_KEYS = (
    "metadata", "thinking", "context_management", "top_k", "stream", "temperature",
    "stop_sequences", "service_tier", "x_future_parameter",
)  # fmt: skip
