"""The `<persisted-output>` block: its id, header and UTF-8-safe preview, and recognising one."""

from __future__ import annotations

import hashlib

import pytest

from proxy.content import (
    PERSISTED_CLOSE,
    PERSISTED_OPEN,
    is_persisted,
    output_id,
    persisted_block,
    system_lead,
)


@pytest.mark.parametrize("text", ["", "hello", "é" * 40, "😀 x" * 3])
def test_output_id_is_32_hex_of_the_texts_sha256(text: str) -> None:
    assert output_id(text) == hashlib.sha256(text.encode()).hexdigest()[:32]


def test_output_id_tells_texts_apart_and_survives_a_lone_surrogate() -> None:
    assert output_id("a") != output_id("b")
    assert len(output_id("\ud800 broken")) == 32


@pytest.mark.parametrize(
    ("text", "preview_bytes", "preview"),
    [
        ("abcdef", 3, "abc"),
        ("abc", 10, "abc"),
        ("é" * 10, 5, "éé"),  # 2 bytes each: the third would end past byte 5
        ("😀x", 3, ""),  # a 4-byte character is dropped whole
        ("ab\ncd", 4, "ab\nc"),
    ],
)
def test_persisted_block_has_a_three_line_header_then_a_preview_cut_on_a_utf8_boundary(
    text: str, preview_bytes: int, preview: str
) -> None:
    oid, block = persisted_block(text, preview_bytes=preview_bytes)
    assert oid == output_id(text)
    *header, rest = block.split("\n", 3)
    assert header[0] == f'{PERSISTED_OPEN} id="{oid}" chars="{len(text)}">'
    assert header[1].endswith(f"GET /v1/ctx/outputs/{oid}")
    assert f"({len(text)} chars)" in header[1]
    assert header[2] == f"Preview (first {preview_bytes} bytes):"
    assert rest == f"{preview}\n{PERSISTED_CLOSE}"


def test_persisted_block_of_one_text_is_byte_identical_every_time() -> None:
    text = "line\n" * 1_000
    assert persisted_block(text, preview_bytes=100) == persisted_block(text, preview_bytes=100)


@pytest.mark.parametrize("preview_bytes", [0, 10, 2_000, 4_999, 5_000, 9_000])
@pytest.mark.parametrize("text", ["x" * 5_000, "é" * 3_000, "a\nb\n" * 900])
def test_is_persisted_recognises_a_block_persisted_block_wrote_with_any_preview_size(
    text: str, preview_bytes: int
) -> None:
    _, block = persisted_block(text, preview_bytes=preview_bytes)
    assert is_persisted(block)


def header(
    oid: str = "0" * 32, chars: int = 9, fetch_id: str | None = None, preview: int = 3
) -> str:
    return (
        f'{PERSISTED_OPEN} id="{oid}" chars="{chars}">\n'
        f"Output too large ({chars} chars), stored in full: GET /v1/ctx/outputs/{fetch_id or oid}\n"
        f"Preview (first {preview} bytes):\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        "plain output",
        f'{PERSISTED_OPEN} id="{"0" * 32}" chars="1">\n' + "x" * 5_000 + PERSISTED_CLOSE,
        f'{PERSISTED_OPEN} id="{"0" * 32}" chars="1">\nno close tag',
        f'{PERSISTED_OPEN} id="not-hex" chars="1">\nx\n{PERSISTED_CLOSE}',
        f'{PERSISTED_OPEN} id="{"0" * 31}" chars="1">\nx\n{PERSISTED_CLOSE}',
        f'text first\n{PERSISTED_OPEN} id="{"0" * 32}" chars="1">\nx\n{PERSISTED_CLOSE}',
        header() + f"abcd\n{PERSISTED_CLOSE}",
        header(fetch_id="1" * 32) + f"abc\n{PERSISTED_CLOSE}",
        header().replace("(9 chars)", "(8 chars)") + f"abc\n{PERSISTED_CLOSE}",
        header() + "abc\n",
    ],
    ids=[
        "plain",
        "one-header-line",
        "no-close",
        "bad-id",
        "short-id",
        "not-at-start",
        "preview-over-its-size",
        "fetch-id-differs",
        "chars-differ",
        "no-close-after-header",
    ],
)
def test_is_persisted_rejects_look_alikes(text: str) -> None:
    assert not is_persisted(text)


def test_is_persisted_takes_a_block_exactly_at_its_announced_preview_size() -> None:
    assert is_persisted(header() + f"abc\n{PERSISTED_CLOSE}")
    assert is_persisted(header() + f"\n{PERSISTED_CLOSE}")


@pytest.mark.parametrize(
    ("roles", "lead"),
    [
        ((), 0),
        (("user",), 0),
        (("system", "developer", "user", "system"), 2),
        (("developer", "assistant"), 1),
        (("system",), 1),
    ],
)
def test_system_lead_counts_only_the_leading_system_and_developer_messages(
    roles: tuple[str, ...], lead: int
) -> None:
    assert system_lead([{"role": role, "content": "x"} for role in roles]) == lead
