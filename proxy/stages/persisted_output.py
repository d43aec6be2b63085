"""The `<persisted-output>` block that replaces a tool result stored in full (budgets rule 2). Pure.

A block's first three lines are its header (id and size, the fetch line, the preview line), then
up to `preview_bytes` bytes of the text and the close tag. The id is the sha256 of the text
(`output_id`), so one text always renders byte-identically. `is_persisted` recognises a block
`persisted_block` wrote (budgets rule 1), whatever preview size it was written with, and not a
look-alike: a different header, or more text than its own header announces.
"""

from __future__ import annotations

import hashlib
import re

from proxy.content import PERSISTED_CLOSE, PERSISTED_OPEN

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
