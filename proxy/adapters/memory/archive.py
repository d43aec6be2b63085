"""The embedded store's archive in a tenant's workspace, so a user without Redis can still read
what was compacted: `raw.jsonl` gets one line `{"session", "id", "messages"}` per archived
transcript, and `ctx-<session>.json` holds a session's latest snapshot (replaced whole, through
a `.tmp` file). Files are written in a worker thread, creating the folder if needed; with no
folder for the tenant (`dir_for(tenant)` is None) nothing is written.

`raw.jsonl` only grows (each compaction appends a whole history), so once a line would take it
past `raw_max_bytes` it becomes `raw.jsonl.1` (replacing the one before) and a new file starts:
at most about twice the limit on disk, the newest transcripts in `raw.jsonl`. Snapshots not
rewritten for `snapshot_ttl_s` (the session TTL: their sessions are gone) are removed when
another snapshot is written in the folder, at most once per `PRUNE_EVERY_S`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from proxy.adapters.memory.files import remove_stale, replace_file

RAW_MAX_BYTES = 256 * 1024 * 1024
PRUNE_EVERY_S = 3600.0


class ArchiveFiles:
    """Writes to the folder `dir_for(tenant)` names, if any."""

    __slots__ = ("_dir_for", "_pruned_at", "_raw_max_bytes", "_snapshot_ttl_s")

    def __init__(
        self,
        dir_for: Callable[[str], Path | None],
        *,
        raw_max_bytes: int = RAW_MAX_BYTES,
        snapshot_ttl_s: float | None = None,
    ) -> None:
        self._dir_for = dir_for
        self._raw_max_bytes = raw_max_bytes
        self._snapshot_ttl_s = snapshot_ttl_s
        self._pruned_at: dict[Path, float] = {}  # one entry per tenant folder

    async def append_transcript(
        self, tenant: str, session: str, entry_id: str, messages_json: bytes
    ) -> None:
        folder = self._dir_for(tenant)
        if folder is not None:
            line = orjson.dumps({"session": session, "id": entry_id})[:-1] + b',"messages":'
            data = line + messages_json + b"}\n"
            await asyncio.to_thread(_append, folder / "raw.jsonl", data, self._raw_max_bytes)

    async def write_snapshot(self, tenant: str, session: str, snapshot_json: bytes) -> None:
        folder = self._dir_for(tenant)
        if folder is None:
            return
        await asyncio.to_thread(replace_file, folder / f"ctx-{session}.json", snapshot_json)
        ttl_s, now = self._snapshot_ttl_s, time.time()
        if ttl_s is not None and now - self._pruned_at.get(folder, 0.0) >= PRUNE_EVERY_S:
            self._pruned_at[folder] = now
            await asyncio.to_thread(remove_stale, folder, "ctx-*.json", before=now - ttl_s)


def _append(path: Path, data: bytes, max_bytes: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size + len(data) > max_bytes:
            path.replace(path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass  # the first line
    with path.open("ab") as handle:
        handle.write(data)
