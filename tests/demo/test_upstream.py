"""The demo's scripted upstream reads the bootstrapped system prompt: the user's name and the
newest line of the memory index, from the first system message that has them."""

from __future__ import annotations

from typing import Any

from proxy.demo.upstream import newest_memory, user_name


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def test_the_name_comes_from_the_first_system_message_giving_one() -> None:
    messages = [system("No name here."), system("Name: Sam"), system("Call her Ada")]
    assert user_name(messages) == "Sam"
    assert user_name([system("Call them Kit")]) == "Kit"
    assert user_name([{"role": "user", "content": "Name: Eve"}]) == "there"


def test_the_newest_memory_is_the_index_last_line_without_its_date() -> None:
    index = "<memory_index>\n- 2026-01-02: Old note\n- 2026-03-04: Prefers tabs\n</memory_index>"
    assert newest_memory([system("x"), system(index)]) == "prefers tabs"
    assert newest_memory([{"role": "user", "content": index}]) == "nothing yet"
