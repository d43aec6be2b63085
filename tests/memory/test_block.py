"""The `<memory>` block of a summarizer's answer: read, counted as none/empty/malformed, removed."""

from __future__ import annotations

import pytest

from proxy.memory.block import MEMORY_INSTRUCTION, Extraction, read_memory, without_memory

ANSWER = (
    "<analysis>a</analysis><summary>S</summary>\n"
    "<memory>\n- Lives in Lisbon.\n- Prefers short answers.\n</memory>"
)


def test_facts_are_the_lines_starting_with_a_dash() -> None:
    assert read_memory(ANSWER) == Extraction(
        "facts", ("Lives in Lisbon.", "Prefers short answers.")
    )


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ("<summary>S</summary>", "none"),
        ("<summary>S</summary><memory></memory>", "empty"),
        ("<summary>S</summary><memory>\n  \n</memory>", "empty"),
        ("<summary>S</summary><memory>None worth keeping.</memory>", "malformed"),
        ("<memory>-no space\n* star\n- </memory>", "malformed"),
    ],
)
def test_an_answer_without_facts_says_why(answer: str, status: str) -> None:
    assert read_memory(answer) == Extraction(status)  # type: ignore[arg-type]


def test_lines_that_are_not_facts_are_skipped_among_facts() -> None:
    found = read_memory("<memory>Here they are:\n- One.\nnoise\n  - Two.\n</memory>")
    assert found == Extraction("facts", ("One.", "Two."))


def test_the_last_block_counts_and_an_unclosed_one_runs_to_the_end() -> None:
    answer = "<analysis>I will write <memory></memory> last</analysis><MEMORY>\n- Kept."
    assert read_memory(answer) == Extraction("facts", ("Kept.",))


def test_the_block_is_taken_out_of_the_answer() -> None:
    assert without_memory(ANSWER) == "<analysis>a</analysis><summary>S</summary>\n"
    assert without_memory("<summary>S</summary><memory>- x") == "<summary>S</summary>"


def test_the_instruction_asks_for_the_block_and_dash_lines() -> None:
    assert "<memory></memory>" in MEMORY_INSTRUCTION and '"- "' in MEMORY_INSTRUCTION
