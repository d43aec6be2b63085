"""The OpenAI Agents SDK (`agents`), with its default model (the Responses API), running a
two-tool agent through ctxproxy in front of each upstream kind: both tools run, their results
reach the model paired with their calls, and the agent ends with the model's answer."""

from __future__ import annotations

import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool

from tests.e2e.agent import settled
from tests.e2e.conftest import MakeAnthropicProxy
from tests.e2e.responses_upstreams import KINDS, make_upstream
from tests.server.conftest import MakeProxy


@pytest.mark.parametrize("kind", KINDS)
async def test_a_two_tool_agent_runs_to_its_answer(
    kind: str, make_proxy: MakeProxy, make_anthropic_proxy: MakeAnthropicProxy
) -> None:
    upstream = await make_upstream(kind, make_proxy, make_anthropic_proxy)
    ran: list[str] = []

    @function_tool
    def find_flight(city: str) -> str:
        """The next flight to a city."""
        ran.append(f"flight {city}")
        return f"TP1234 to {city} at 07:40"

    @function_tool
    def find_hotel(city: str) -> str:
        """A hotel in a city."""
        ran.append(f"hotel {city}")
        return f"Hotel Miradouro, {city}"

    upstream.call(("call_f", "find_flight", {"city": "Porto"}))
    upstream.call(("call_h", "find_hotel", {"city": "Porto"}))
    upstream.say("Fly TP1234 at 07:40 and stay at Hotel Miradouro.")
    async with upstream.client() as client:
        agent = Agent(
            name="travel",
            instructions="Plan the trip with the tools.",
            tools=[find_flight, find_hotel],
            model=OpenAIResponsesModel(model="gpt-5", openai_client=client),
        )
        result = await Runner.run(
            agent, "Plan a trip to Porto.", run_config=RunConfig(tracing_disabled=True)
        )
    await settled(upstream.proxy.app)
    assert ran == ["flight Porto", "hotel Porto"]
    assert result.final_output == "Fly TP1234 at 07:40 and stay at Hotel Miradouro."
    requests = upstream.requests
    assert len(requests) == 3
    last = upstream.text_sent(requests[-1])
    assert "TP1234 to Porto" in last and "Hotel Miradouro, Porto" in last
    assert "Plan the trip with the tools." in last and "Wren" in last  # bootstrap too
    for n, body in enumerate(requests):
        assert upstream.problem(body) is None, f"upstream request {n}"
