"""The prepared internal body → the Responses body: as sent where nothing changed (hypothesis
over any body, unknown items too), re-rendered where a stage changed something."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings

from proxy.inbound.responses_render import internal_to_responses
from proxy.inbound.responses_request import responses_to_internal
from tests.inbound.responses_builders import (
    body,
    call,
    developer,
    output,
    reasoning,
    said,
    shell_tool,
    user,
    wire_problem,
)
from tests.inbound.responses_strategies import bodies

JSON = dict[str, Any]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_a_body_nothing_changed_comes_back_as_the_client_sent_it(sent: JSON) -> None:
    kept = copy.deepcopy(sent)
    internal, carrier = responses_to_internal(sent)
    out = internal_to_responses(internal, carrier)
    assert out == kept
    assert sent == kept  # nothing mutated
    if "input" in sent:
        assert out["input"] is sent["input"]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_a_copied_history_is_recognised_as_untouched(sent: JSON) -> None:
    """Stages may hand on equal copies rather than the very objects: still as sent."""
    internal, carrier = responses_to_internal(sent)
    copied = copy.deepcopy(internal)
    assert internal_to_responses(copied, carrier) == sent


def session() -> JSON:
    return body(
        developer("Sandbox: read-only."),
        user("List the files."),
        reasoning("rs_1", "gAAAA-one"),
        call("c1", command="ls"),
        output("c1", "a.py\nb.py\n" * 50, id="fco_1", status="completed"),
        reasoning("rs_2", "gAAAA-two"),
        call("c2", command="cat a.py"),
        output("c2", "print('a')"),
        said("Two files."),
        user("Thanks."),
        instructions="You are Codex.",
        tools=[shell_tool(), {"type": "web_search"}],
        store=False,
        include=["reasoning.encrypted_content"],
    )


def replaced(internal: JSON, index: int, **fields: Any) -> JSON:
    messages = list(internal["messages"])
    messages[index] = {**messages[index], **fields}
    return {**internal, "messages": messages}


def test_a_pruned_output_keeps_its_id_status_and_place_and_nothing_else_changes() -> None:
    sent = session()
    internal, carrier = responses_to_internal(sent)
    tool = next(n for n, m in enumerate(internal["messages"]) if m["role"] == "tool")
    out = internal_to_responses(replaced(internal, tool, content="a.py ...(truncated)"), carrier)
    assert out["input"][4] == output("c1", "a.py ...(truncated)", id="fco_1", status="completed")
    for n in (0, 1, 2, 3, 5, 6, 7, 8, 9):
        assert out["input"][n] is sent["input"][n]
    assert out["instructions"] is sent["instructions"] and out["tools"] is sent["tools"]
    assert list(out) == list(sent)
    assert wire_problem(out) is None


def test_bootstrap_goes_into_the_instructions_static_client_dynamic() -> None:
    sent = session()
    internal, carrier = responses_to_internal(sent)
    instructions, permissions = internal["messages"][:2]
    merged = {
        "role": "system",
        "content": [
            {"type": "text", "text": "<soul>Ada</soul>"},
            *instructions["content"],
            *permissions["content"],
            {"type": "text", "text": "<user_profile>Sam</user_profile>"},
        ],
    }
    prepared = {**internal, "messages": [merged, *internal["messages"][2:]]}
    out = internal_to_responses(prepared, carrier)
    parts = ["<soul>Ada</soul>", "You are Codex.", "<user_profile>Sam</user_profile>"]
    assert out["instructions"] == "\n\n".join(parts)
    assert out["input"] == sent["input"]
    assert all(a is b for a, b in zip(out["input"], sent["input"], strict=True))


def test_bootstrap_without_client_instructions_adds_them() -> None:
    sent = body(developer("Rules."), user("Hi."))
    internal, carrier = responses_to_internal(sent)
    merged = {
        "role": "developer",
        "content": [{"type": "text", "text": "STATIC"}, *internal["messages"][0]["content"]],
    }
    out = internal_to_responses(
        {**internal, "messages": [merged, internal["messages"][1]]}, carrier
    )
    assert out["instructions"] == "STATIC"
    assert out["input"] == sent["input"]


def test_a_stored_summary_replaces_the_items_it_covers() -> None:
    sent = session()
    internal, carrier = responses_to_internal(sent)
    summary = {"role": "user", "content": "[Conversation summary]\nTwo files were listed."}
    kept = internal["messages"][-2:]
    prepared = {**internal, "messages": [*internal["messages"][:2], summary, *kept]}
    out = internal_to_responses(prepared, carrier)
    assert out["input"] == [
        sent["input"][0],
        user("[Conversation summary]\nTwo files were listed."),
        sent["input"][8],
        sent["input"][9],
    ]
    assert wire_problem(out) is None


def test_a_placeholder_result_is_a_fresh_output_for_its_call() -> None:
    sent = body(user("go"), call("c1"), call("c2"), output("c1"))
    internal, carrier = responses_to_internal(sent)
    placeholder = {"role": "tool", "tool_call_id": "c2", "content": "[no result]"}
    out = internal_to_responses(
        {**internal, "messages": [*internal["messages"], placeholder]}, carrier
    )
    assert out["input"][-1] == {
        "type": "function_call_output",
        "call_id": "c2",
        "output": "[no result]",
    }
    assert wire_problem(out) is None


def test_changed_parameters_and_a_prompt_cache_key_are_rendered_back() -> None:
    sent = body(user("Hi"), reasoning={"effort": "low", "summary": "auto"}, max_output_tokens=100)
    internal, carrier = responses_to_internal(sent)
    prepared = {
        **internal,
        "prompt_cache_key": "ctxproxy-default",
        "reasoning_effort": "high",
        "max_completion_tokens": 50,
    }
    out = internal_to_responses(prepared, carrier)
    assert out["prompt_cache_key"] == "ctxproxy-default"
    assert out["reasoning"] == {"summary": "auto", "effort": "high"}
    assert out["max_output_tokens"] == 50
    assert out["input"] is sent["input"]


def test_a_tool_a_stage_added_is_a_flat_function_tool_beside_the_clients_functions() -> None:
    sent = body(user("Hi"), tools=[shell_tool(), {"type": "web_search"}])
    internal, carrier = responses_to_internal(sent)
    recall = {
        "type": "function",
        "function": {"name": "recall", "description": "Fetch.", "parameters": {"type": "object"}},
    }
    out = internal_to_responses({**internal, "tools": [*internal["tools"], recall]}, carrier)
    fresh = {
        "type": "function",
        "name": "recall",
        "description": "Fetch.",
        "parameters": {"type": "object"},
        "strict": False,
    }
    assert out["tools"] == [sent["tools"][0], fresh, sent["tools"][1]]
    assert out["tools"][0] is sent["tools"][0]


def test_a_string_input_stays_a_string_until_something_changes() -> None:
    sent = body(instructions="Be brief.")
    sent["input"] = "Hello"
    internal, carrier = responses_to_internal(sent)
    assert internal_to_responses(internal, carrier)["input"] == "Hello"
    summary = {"role": "user", "content": "[Conversation summary]\nx"}
    out = internal_to_responses({**internal, "messages": [*internal["messages"], summary]}, carrier)
    assert out["input"] == [{"role": "user", "content": "Hello"}, user("[Conversation summary]\nx")]
