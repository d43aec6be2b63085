"""The embedded store's archive in a tenant's workspace, so a user without Redis can still read
what was compacted: `raw.jsonl` gets one line `{"session", "id", "messages"}` per archived
transcript, and `ctx-<session>.json` holds a session's latest snapshot (replaced whole, through
a `.tmp` file). Files are written in a worker thread, creating the folder if needed; with no
folder for the tenant (`dir_for(tenant)` is None) nothing is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import orjson


class ArchiveFiles:
    """Writes to the folder `dir_for(tenant)` names, if any."""

    __slots__ = ("_dir_for",)

    def __init__(self, dir_for: Callable[[str], Path | None]) -> None:
        self._dir_for = dir_for

    async def append_transcript(
        self, tenant: str, session: str, entry_id: str, messages_json: bytes
    ) -> None:
        folder = self._dir_for(tenant)
        if folder is not None:
            line = orjson.dumps({"session": session, "id": entry_id})[:-1] + b',"messages":'
            await asyncio.to_thread(_append, folder / "raw.jsonl", line + messages_json + b"}\n")

    async def write_snapshot(self, tenant: str, session: str, snapshot_json: bytes) -> None:
        folder = self._dir_for(tenant)
        if folder is not None:
            await asyncio.to_thread(_write, folder / f"ctx-{session}.json", snapshot_json)


def _append(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        handle.write(data)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
