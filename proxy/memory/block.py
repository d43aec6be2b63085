"""The `<memory>` block: the summarizer is asked for durable facts in the same answer as its
summary, and they are read back from it here. Pure.

One call, not two: the request that summarizes a conversation already holds all of it (and, in
its system content, the memory index the facts would join), so asking for the facts costs the
instruction below (about 110 tokens of input, sent once per compaction, after the cached prefix)
and the facts themselves as output; a separate call would send the whole conversation again.

An answer without a `<memory>` block, or with an empty one, has no facts. Lines of the block that
do not start with `- ` are not facts; a block holding only such lines is `malformed`.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

MEMORY_INSTRUCTION = (
    "Finally, inside <memory></memory>, list the durable facts worth knowing in a later, "
    "separate conversation: the user's preferences and circumstances, decisions taken and why, "
    "facts about their projects, people and tools. Leave out the task's transient state and "
    "anything a <memory_index> above already holds. One self-contained fact per line, each "
    'line starting with "- ". Write <memory></memory> with nothing inside when there is none.'
)

_BLOCK = re.compile(r"<memory>(.*?)(?:</memory>|\Z)", re.DOTALL | re.IGNORECASE)
_STRAY_CLOSE = re.compile(r"</memory>", re.IGNORECASE)

Status = Literal["none", "empty", "malformed", "facts"]


class Extraction(NamedTuple):
    """What an answer's `<memory>` block held: `facts` (their texts, as the model wrote them,
    not yet sanitised) when `status` is `facts`."""

    status: Status
    facts: tuple[str, ...] = ()


def read_memory(answer: str) -> Extraction:
    """The facts of the answer's last `<memory>` block (an unclosed one runs to the end)."""
    blocks = _BLOCK.findall(answer)
    if not blocks:
        return Extraction("none")
    lines = [line.strip() for line in str(blocks[-1]).splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return Extraction("empty")
    facts = tuple(line[2:].strip() for line in lines if line.startswith("- ") and line[2:].strip())
    return Extraction("facts", facts) if facts else Extraction("malformed")


def without_memory(answer: str) -> str:
    """The answer with its `<memory>` blocks taken out, for the summary to be read from."""
    return _STRAY_CLOSE.sub("", _BLOCK.sub("", answer))
