"""The facts kept: in order, once per normalised text, capped (oldest out); the settings."""

from __future__ import annotations

import pytest

from proxy.errors import InvalidSetting
from proxy.memory.ledger import FactLedger, MemorySettings


def line(text: str, day: str = "2026-12-03") -> str:
    return f"- {day}: {text}"


def test_new_facts_are_appended_in_order() -> None:
    ledger = FactLedger()
    assert ledger.add([line("A"), line("B")], max_lines=10) == 2
    assert ledger.add([line("C")], max_lines=10) == 1
    assert ledger.lines == (line("A"), line("B"), line("C"))


def test_a_fact_already_kept_is_not_added_again() -> None:
    ledger = FactLedger([line("Prefers ISO dates.")])
    same = line("prefers  ISO-dates", day="2027-01-01")
    assert ledger.add([same, line("Other"), line("other!")], max_lines=10) == 1
    assert ledger.lines == (line("Prefers ISO dates."), line("Other"))


def test_past_the_cap_the_oldest_go_first() -> None:
    ledger = FactLedger([line(str(i)) for i in range(5)])
    assert ledger.add([line("5"), line("6")], max_lines=5) == 2
    assert ledger.lines == tuple(line(str(i)) for i in range(2, 7))


def test_lines_stay_one_object_until_a_change() -> None:
    ledger = FactLedger([line("A")])
    before = ledger.lines
    ledger.add([line("a.")], max_lines=5)
    assert ledger.lines is before
    ledger.add([line("B")], max_lines=5)
    assert ledger.lines is not before


def test_forget_removes_what_the_pattern_matches() -> None:
    ledger = FactLedger([line("Gravel ride in March"), line("Lives in Lisbon")])
    assert ledger.forget("gravel") == 1
    assert ledger.lines == (line("Lives in Lisbon"),)
    assert ledger.forget("tennis") == 0


def test_a_ledger_read_back_drops_duplicates_and_blank_keys() -> None:
    ledger = FactLedger([line("A"), line("a"), "- 2026-12-03: ..."])
    assert ledger.lines == (line("A"),)


def test_settings_check_their_values_and_name_the_owner() -> None:
    assert MemorySettings().owner("s1") is None
    assert MemorySettings(scope="session").owner("s1") == "s1"
    with pytest.raises(InvalidSetting, match="max_lines"):
        MemorySettings(max_lines=0)
    with pytest.raises(InvalidSetting, match="scope"):
        MemorySettings(scope="user")  # type: ignore[arg-type]
