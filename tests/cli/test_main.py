"""The `ctxproxy` command as users run it: serve (and stop on SIGTERM), keys, bootstrap."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from proxy.cli.main import main
from proxy.server.keys import digest
from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_keys_new_prints_a_token_and_its_digest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "new"]) == 0
    out = capsys.readouterr().out
    token = out.split("token:")[1].split()[0]
    assert digest(token) in out


def test_keys_hash(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "hash", "secret"]) == 0
    assert capsys.readouterr().out.strip() == digest("secret")


def test_bootstrap_preview_shows_static_and_dynamic_parts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bootstrap", "--config", str(ROOT / "config" / "ctxproxy.toml")]) == 0
    out = capsys.readouterr().out
    static, dynamic = out.split("=== dynamic part")
    assert "<soul>" in static and "<agent>" in static and "<user_profile>" not in static
    assert "<user_profile>" in dynamic and "<memory_index>" in dynamic


def test_serve_without_config_answers_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXPROXY_", "OPENAI_"))}
    env["CTXPROXY_PORT"] = str(port)
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        body = _wait_for(f"http://127.0.0.1:{port}/readyz")
        assert b'"store": "ok"' in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def _wait_for(url: str, timeout: float = 20.0) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return bytes(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
