"""The images of the client's tool results, found again for each prepared tool message."""

from __future__ import annotations

from typing import Any

from proxy.inbound.messages_request import messages_to_internal
from proxy.inbound.responses_request import responses_to_internal
from proxy.inbound.result_images import messages_result_images, responses_result_images
from tests.inbound import responses_builders as r
from tests.inbound.builders import assistant, body, text, tool_result, tool_use, user

MARK = {"type": "ephemeral"}
PNG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}
URL = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}}
BY_ID = {"type": "image", "source": {"type": "file", "file_id": "file_011"}}
PNG_PART = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}}
URL_PART = {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}}


def conversation(*results: Any) -> dict[str, Any]:
    uses = [tool_use(f"t{n}", "shot") for n in range(1, len(results) + 1)]
    return body(user("look"), assistant(*uses), user(*results))


def test_each_tool_message_gets_its_results_images_as_image_url_parts() -> None:
    marked = {**URL, "cache_control": MARK}
    sent = conversation(
        tool_result("t1", [text("two shots"), PNG, marked]),
        tool_result("t2", "text only"),
        tool_result("t3", [BY_ID]),
    )
    internal, carrier = messages_to_internal(sent)
    found = messages_result_images(internal["messages"], carrier)
    assert found == {2: [PNG_PART, {**URL_PART, "cache_control": MARK}]}


def test_a_tool_message_a_stage_changed_keeps_its_images_one_a_stage_replaced_has_none() -> None:
    internal, carrier = messages_to_internal(
        conversation(tool_result("t1", [text("big"), PNG]), tool_result("t2", [URL]))
    )
    final = list(internal["messages"])
    final[2] = {**final[2], "content": "[pruned]"}
    assert messages_result_images(final, carrier) == {2: [PNG_PART], 3: [URL_PART]}
    summary = {"role": "user", "content": "SUMMARY"}
    assert messages_result_images([summary, final[3]], carrier) == {1: [URL_PART]}


def test_a_function_call_outputs_input_images_with_a_url_are_found() -> None:
    image = {"type": "input_image", "image_url": "https://example.com/b.png", "detail": "low"}
    by_id = {"type": "input_image", "file_id": "file_1"}
    sent = r.body(
        r.user("look"),
        r.call("c1", "shot"),
        r.output("c1", [{"type": "input_text", "text": "here"}, image, by_id]),
        r.call("c2", "shot"),
        r.output("c2", "no image"),
    )
    internal, carrier = responses_to_internal(sent)
    found = responses_result_images(internal["messages"], carrier)
    part = {"type": "image_url", "image_url": {"url": "https://example.com/b.png", "detail": "low"}}
    assert found == {2: [part]}
