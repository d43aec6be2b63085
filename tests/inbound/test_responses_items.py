"""One Responses item, part or tool ⇄ one chat part, tool call or tool."""

from __future__ import annotations

from proxy.inbound.responses_items import (
    custom_input,
    fresh_part,
    fresh_tool,
    fresh_tool_choice,
    part_of,
    tool_choice_of,
    tool_of,
)


def test_parts_a_chat_model_reads_and_the_ones_carried() -> None:
    assert part_of({"type": "output_text", "text": "a", "annotations": []}) == {
        "type": "text",
        "text": "a",
    }
    image = {"type": "input_image", "image_url": "https://x/a.png", "detail": "original"}
    assert part_of(image) == {"type": "image_url", "image_url": {"url": "https://x/a.png"}}
    assert part_of(image, text_only=True) is None
    assert part_of({"type": "input_image", "file_id": "file-1", "detail": "auto"}) is None
    assert part_of({"type": "input_file", "file_id": "file-1"}) == {
        "type": "file",
        "file": {"file_id": "file-1"},
    }
    assert part_of({"type": "input_file", "file_url": "https://x/a.pdf"}) is None
    assert part_of({"type": "refusal", "refusal": "no"}) is None


def test_fresh_parts_by_role() -> None:
    text = {"type": "text", "text": "hi"}
    assert fresh_part(text, role="user") == {"type": "input_text", "text": "hi"}
    assert fresh_part(text, role="assistant") == {
        "type": "output_text",
        "text": "hi",
        "annotations": [],
    }
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
    assert fresh_part(image, role="user") == {
        "type": "input_image",
        "image_url": "data:image/png;base64,AA",
        "detail": "auto",
    }


def test_tools_flat_to_nested_and_back() -> None:
    flat = {
        "type": "function",
        "name": "f",
        "description": "d",
        "parameters": {"type": "object"},
        "strict": True,
    }
    nested = tool_of(flat)
    assert nested == {
        "type": "function",
        "function": {
            "name": "f",
            "description": "d",
            "parameters": {"type": "object"},
            "strict": True,
        },
    }
    assert fresh_tool(nested) == flat
    assert (
        tool_of({"type": "web_search"}) is None
        and tool_of({"type": "mcp", "server_label": "x"}) is None
    )
    assert tool_choice_of({"type": "function", "name": "f"}) == {
        "type": "function",
        "function": {"name": "f"},
    }
    assert tool_choice_of({"type": "custom", "name": "apply_patch"}) == {
        "type": "function",
        "function": {"name": "apply_patch"},
    }
    assert tool_choice_of({"type": "web_search_preview"}) is None
    assert fresh_tool_choice({"type": "function", "function": {"name": "f"}}) == {
        "type": "function",
        "name": "f",
    }


def test_a_custom_tools_input_comes_out_of_its_functions_arguments() -> None:
    assert custom_input('{"input": "diff"}') == "diff"
    assert custom_input("*** Begin Patch") == "*** Begin Patch"
    assert custom_input('{"other": 1}') == '{"other": 1}'
