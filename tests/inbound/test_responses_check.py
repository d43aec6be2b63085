"""Which bodies the Responses edge refuses, and what the 400 says."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.inbound.responses_check import request_problem
from tests.inbound.responses_builders import body, call, fixture, fixture_names, output, user


@pytest.mark.parametrize(
    ("sent", "problem"),
    [
        ([], "body: Input should be an object"),
        ({"input": "hi"}, "model: Field required"),
        ({"model": "m", "input": 3}, "input: Input should be a string or a list of items"),
        (body("x"), "input.0: Input should be an object"),
        (body({"role": "robot", "content": "x"}), "input.0.role: Input should be"),
        (
            body({"role": "user", "content": 3}),
            "input.0.content: Input should be a string or a list of objects",
        ),
        (body({"type": "function_call_output", "output": "x"}), "input.0.call_id: Field required"),
        (
            body({"type": "function_call", "call_id": "c", "arguments": "{}"}),
            "input.0.name: Field required",
        ),
        (
            body(output("c", {"a": 1})),
            "input.0.output: Input should be a string or a list of objects",
        ),
        (body(user("x"), instructions=["x"]), "instructions: Input should be a string"),
        (body(user("x"), previous_response_id=7), "previous_response_id: Input should be a string"),
        (body(user("x"), tools={"type": "function"}), "tools: Input should be a list of objects"),
    ],
)
def test_bodies_the_edge_cannot_take_are_refused_saying_where(sent: Any, problem: str) -> None:
    found = request_problem(sent)
    assert found is not None and found.startswith(problem)


def test_ordinary_bodies_and_every_recorded_one_pass() -> None:
    assert request_problem(body(user("x"), call("c"), output("c"))) is None
    assert request_problem({"model": "m", "input": "hi"}) is None
    assert request_problem({"model": "m", "previous_response_id": "resp_1"}) is None
    for name in fixture_names():
        assert request_problem(fixture(name)["body"]) is None, name
