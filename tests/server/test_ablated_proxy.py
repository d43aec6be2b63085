"""benchmarks/ablations.py: a proxy with any one feature switched off still answers, so that the
feature-cost section measures a working proxy (an ablation whose replacement no longer fits its
caller would make every request fail)."""

from __future__ import annotations

import pytest

from benchmarks.ablations import ABLATIONS, apply
from tests.server.conftest import MakeProxy


@pytest.mark.parametrize("name", [*ABLATIONS, "all"])
async def test_an_ablated_proxy_still_answers_json_and_streams(
    name: str, make_proxy: MakeProxy
) -> None:
    patches = apply(list(ABLATIONS) if name == "all" else [name])
    try:
        proxy = await make_proxy()
        messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "hi"}]
        async with proxy.client() as client:
            answer = await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
            stream = await client.chat.completions.create(
                model="m",
                messages=messages,
                stream=True,  # type: ignore[arg-type]
            )
            chunks = [chunk async for chunk in stream]
        assert answer.choices[0].message.content
        assert any(c.choices and c.choices[0].delta.content for c in chunks)
    finally:
        patches.undo()
