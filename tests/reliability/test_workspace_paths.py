"""Workspace paths over HTTP: no session id or symlink leads a read outside the workspace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from proxy.config import load_settings
from proxy.errors import ConfigError
from tests.reliability.conftest import MakeRig
from tests.reliability.support import auth, chat

CANARY = "CANARY-7f3a9c-NEVER-READ"
SESSIONS = ["evil", "..", "../outside", "%2e%2e", "..%2F..%2Foutside", "/etc", "x" * 300,
            "sessions/../../outside", "evil/..", "ok.session"]  # fmt: skip


def _layout(workspace: Path, outside: Path) -> None:
    outside.mkdir()
    (outside / "soul.md").write_text(CANARY)
    (outside / "memory").mkdir()
    (outside / "memory" / "MEMORY.md").write_text(CANARY)
    for name in ("soul.md", "user.md"):
        (workspace / name).unlink(missing_ok=True)
    (workspace / "soul.md").symlink_to(outside / "soul.md")
    (workspace / "user.md").symlink_to("../../outside/soul.md")
    (workspace / "agent.md").write_text("AGENT-RULES-OK")
    memory = workspace / "memory"
    if memory.exists():
        for child in memory.iterdir():
            child.unlink()
        memory.rmdir()
    memory.symlink_to(outside / "memory", target_is_directory=True)
    sessions = workspace / "sessions"
    sessions.mkdir(exist_ok=True)
    (sessions / "evil").symlink_to(outside, target_is_directory=True)
    (sessions / "ok.session").mkdir()
    (sessions / "ok.session" / "user.md").symlink_to(outside / "soul.md")


async def test_no_request_opens_a_file_outside_the_workspace(
    make_rig: MakeRig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = await make_rig()
    outside = tmp_path / "outside"
    _layout(rig.workspace, outside)
    opened: list[str] = []
    real_open = os.open

    def recording_open(path: Any, *args: Any, **kw: Any) -> int:
        opened.append(os.path.realpath(path))
        return real_open(path, *args, **kw)

    monkeypatch.setattr(os, "open", recording_open)
    async with aiohttp.ClientSession() as http:
        for session in SESSIONS:
            headers = {**auth(), "X-Ctx-Session": session}
            async with http.post(
                rig.url("/v1/chat/completions"), json=chat(), headers=headers
            ) as response:
                assert response.status == 200
    monkeypatch.undo()
    assert [p for p in opened if p.startswith(str(outside.resolve()))] == []
    for received in rig.fake.chat:
        sent = str(received.body["messages"])
        assert CANARY not in sent
        assert "AGENT-RULES-OK" in sent


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "a\x00b", "x" * 65, ".", "a b"])
def test_tenant_names_that_could_shape_a_path_are_refused(tmp_path: Path, name: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        f'[upstreams.u]\nbase_url = "http://127.0.0.1:1/v1"\n'
        f'[tenants."{name.encode("unicode_escape").decode()}"]\nupstream = "u"\n'
    )
    with pytest.raises(ConfigError):
        load_settings(config, environ={})
