"""The `<persisted-output>` block that replaces a tool result stored in full: the one module that
writes and reads it. Pure.

A block's first three lines are its header (id and size, the fetch line, the preview line), then
up to `preview_bytes` bytes of the text and the close tag. The id is the sha256 of the text
(`output_id`), so one text always renders byte-identically. The budgets stage writes blocks
(`persisted_block`, its rule 2) and leaves them alone (`is_persisted`, its rule 1: a block
`persisted_block` wrote, whatever preview size it was written with, and not a look-alike: a
different header, or more text than its own header announces). The prune stage shortens a block's
preview and keeps its frame (`cut_preview`, `without_close`).
"""

from __future__ import annotations

import hashlib
import re

PERSISTED_OPEN = "<persisted-output"
PERSISTED_CLOSE = "</persisted-output>"
_HEADER_LINES = 3
_BLOCK_HEAD = re.compile(
    re.escape(PERSISTED_OPEN) + r' id="(?P<id>[0-9a-f]{32})" chars="(?P<chars>\d+)">\n'
    r"Output too large \((?P=chars) chars\), stored in full: GET /v1/ctx/outputs/(?P=id)\n"
    r"Preview \(first (?P<preview>\d{1,9}) bytes\):\n"
)
_TAIL = len("\n" + PERSISTED_CLOSE)


def output_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def persisted_block(text: str, *, preview_bytes: int) -> tuple[str, str]:
    """(output id, block). The block's first three lines are its header; the preview follows."""
    oid = output_id(text)
    preview = text.encode("utf-8", "surrogatepass")[:preview_bytes].decode("utf-8", "ignore")
    block = (
        f'{PERSISTED_OPEN} id="{oid}" chars="{len(text)}">\n'
        f"Output too large ({len(text)} chars), stored in full: GET /v1/ctx/outputs/{oid}\n"
        f"Preview (first {preview_bytes} bytes):\n{preview}\n{PERSISTED_CLOSE}"
    )
    return oid, block


def is_persisted(text: str) -> bool:
    """True for a block `persisted_block` wrote: its three header lines, a preview of at most
    the bytes its header announces (so at most as many characters), the close tag."""
    if not text.endswith(PERSISTED_CLOSE):
        return False
    head = _BLOCK_HEAD.match(text)
    return head is not None and len(text) - head.end() - _TAIL <= int(head["preview"])


def is_framed(text: str) -> bool:
    """Whether `text` opens and closes like a block (its header not checked)."""
    return text.startswith(PERSISTED_OPEN) and text.endswith(PERSISTED_CLOSE)


def cut_preview(block: str, *, keep: int, marker: str) -> str | None:
    """A framed `block` with its preview cut to `keep` characters and `marker` after them, its
    header and close tag kept; None when it has no preview line (it then stays whole)."""
    lines = block.split("\n", _HEADER_LINES)
    if len(lines) <= _HEADER_LINES:
        return None
    header = "\n".join(lines[:_HEADER_LINES])
    preview = lines[-1].removesuffix(PERSISTED_CLOSE).removesuffix("\n")
    return f"{header}\n{preview[:keep]}{marker}\n{PERSISTED_CLOSE}"


_CLOSE_LINE = "\n" + PERSISTED_CLOSE


def without_close(text: str) -> str:
    """`text` without the close tag and the line end before it, if it ends with them."""
    return text[: -len(_CLOSE_LINE)] if text.endswith(_CLOSE_LINE) else text
