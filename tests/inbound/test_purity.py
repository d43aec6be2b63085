"""proxy/inbound is a pure edge: no network library, no I/O module (STYLE rules 1, 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_architecture import IO, imported_roots

INBOUND = Path(__file__).resolve().parents[2] / "proxy" / "inbound"


@pytest.mark.parametrize("path", sorted(INBOUND.glob("*.py")), ids=lambda p: p.name)
def test_inbound_modules_do_no_io(path: Path) -> None:
    assert not imported_roots(path) & IO, f"{path.name} imports an I/O module"
