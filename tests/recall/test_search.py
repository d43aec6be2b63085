"""Reading an item back page by page, and the literal search of everything cut."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.recall.search import page_of, search_documents

NAME = "ctx_recall"
_NOTE = re.compile(r"\n\[chars (\d+)-(\d+) of (\d+)(?:; the rest: .*)?\]\Z")


def pages(text: str, *, max_chars: int) -> list[str]:
    """Every page of `text`, following each page's note to the next offset."""
    out, offset = [], 0
    while True:
        page = page_of(text, ref="r", offset=offset, max_chars=max_chars, tool_name=NAME)
        assert len(page) <= max_chars
        note = _NOTE.search(page)
        if note is None:
            return [*out, page]
        out.append(page[: note.start()])
        offset = int(note[2])
        if offset == len(text):
            return out


def test_a_text_that_fits_comes_back_exactly_with_no_note() -> None:
    text = "line one\nline two\n"
    assert page_of(text, ref="r", offset=0, max_chars=1_000, tool_name=NAME) == text


def test_a_long_text_comes_in_pages_whose_notes_say_how_to_fetch_the_rest() -> None:
    text = "x" * 2_500
    first = page_of(text, ref="call_1", offset=0, max_chars=1_000, tool_name=NAME)
    assert len(first) <= 1_000
    assert first.endswith('; the rest: ctx_recall(ref="call_1", offset=794)]')
    assert first.startswith("x" * 794 + "\n[chars 0-794 of 2500")
    last = page_of(text, ref="call_1", offset=2_000, max_chars=1_000, tool_name=NAME)
    assert last == "x" * 500 + "\n[chars 2000-2500 of 2500]"


def test_an_offset_past_the_end_is_explained() -> None:
    answer = page_of("abc", ref="r", offset=3, max_chars=1_000, tool_name=NAME)
    assert answer == '[offset 3 is past the end of ref="r": it has 3 chars]'


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=6_000), st.integers(min_value=1_000, max_value=3_000))
def test_pages_concatenate_to_the_original_for_any_text(text: str, max_chars: int) -> None:
    assert "".join(pages(text, max_chars=max_chars)) == text


DOCS = [
    ("call_1", "alpha\nbeta\ngamma\nERROR: disk full\ndelta\nepsilon\nzeta"),
    ("call_2", "nothing here"),
    ("turns:0-0", "first\nthe Error again"),
]


def test_search_is_case_insensitive_and_gives_lines_with_context_and_refs() -> None:
    found = search_documents(DOCS, "error", max_chars=20_000, tool_name=NAME)
    assert found.occurrences == 2
    assert found.text == (
        '2 occurrence(s) of "error" in cut content:\n\n'
        'ref="call_1" line 4 (read from here: ctx_recall(ref="call_1", offset=6)):\n'
        "      2| beta\n      3| gamma\n>     4| ERROR: disk full\n"
        "      5| delta\n      6| epsilon\n\n"
        'ref="turns:0-0" line 2 (read from here: ctx_recall(ref="turns:0-0", offset=0)):\n'
        "      1| first\n>     2| the Error again"
    )


def test_the_offset_a_match_names_reads_from_its_first_context_line() -> None:
    found = search_documents(DOCS[:1], "disk", max_chars=20_000, tool_name=NAME)
    offset = int(re.search(r"offset=(\d+)", found.text)[1])  # type: ignore[index]
    assert DOCS[0][1][offset:].startswith("beta\n")


def test_nearby_matches_share_one_block() -> None:
    text = "a hit\nx\nb hit\n" + "y\n" * 10 + "c hit"
    found = search_documents([("r", text)], "HIT", max_chars=20_000, tool_name=NAME)
    assert found.text.count('ref="r" line') == 2
    assert found.text.count("\n>") == 3


def test_regex_metacharacters_are_literal_text() -> None:
    docs = [("r", "a+b (c)\n.*\n[x]|y\n^$ \\d")]
    for query in ["a+b (c)", ".*", "[x]|y", "^$ \\d"]:
        found = search_documents(docs, query, max_chars=20_000, tool_name=NAME)
        assert found.occurrences == 1, query
    assert search_documents(docs, "a.b", max_chars=20_000, tool_name=NAME).occurrences == 0


def test_nothing_found_is_one_line() -> None:
    found = search_documents(DOCS, "absent", max_chars=20_000, tool_name=NAME)
    assert found == ('No cut content contains "absent".', 0)


def test_a_result_never_exceeds_max_chars_and_says_more_exists() -> None:
    docs = [(f"call_{i}", "\n".join(f"hit {j}" for j in range(500))) for i in range(20)]
    found = search_documents(docs, "hit", max_chars=5_000, tool_name=NAME)
    assert len(found.text) <= 5_000
    assert found.occurrences == 10_000
    assert "Narrow the query" in found.text.splitlines()[0]


def test_long_lines_are_clipped_around_the_match() -> None:
    line = "a" * 5_000 + "NEEDLE" + "b" * 5_000
    found = search_documents([("r", line)], "needle", max_chars=20_000, tool_name=NAME)
    shown = found.text.splitlines()[-1]
    assert "NEEDLE" in shown and len(shown) < 300
    assert shown.endswith("…") and "| …" in shown


def test_text_whose_case_folding_changes_length_still_points_into_the_text() -> None:
    text = "Straße\nGROSSE hit\nfin"  # "ß" folds to "ss": the folded text is longer
    found = search_documents([("r", text)], "hit", max_chars=20_000, tool_name=NAME)
    assert ">     2| GROSSE hit" in found.text
    assert search_documents([("r", text)], "STRASSE", max_chars=20_000, tool_name=NAME).occurrences


@settings(max_examples=80, deadline=None)
@given(
    st.text(max_size=400),
    st.text(min_size=1, max_size=20).filter(lambda q: "\n" not in q and "\r" not in q),
    st.text(max_size=400),
)
def test_a_needle_anywhere_is_found_with_its_ref(before: str, needle: str, after: str) -> None:
    found = search_documents(
        [("other", "unrelated"), ("call_9", before + needle + after)],
        needle.upper(),
        max_chars=20_000,
        tool_name=NAME,
    )
    if needle.upper().casefold() == needle.casefold():
        assert found.occurrences >= 1
        assert 'ref="call_9"' in found.text


def test_pathological_inputs_take_bounded_time() -> None:
    hay = [("a", "a" * 3_000_000), ("b", ("ab" * 50 + "\n") * 30_000)]
    started = time.perf_counter()
    for query in ["a" * 999 + "b", "(a+)+$", "a", "ab" * 40 + "c", "\\"]:
        found = search_documents(hay, query, max_chars=20_000, tool_name=NAME)
        assert len(found.text) <= 20_000
    assert time.perf_counter() - started < 5.0
