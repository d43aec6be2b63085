"""The `ctxproxy` command as users run it: serve (and stop on SIGTERM), keys, bootstrap."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from proxy import __version__
from proxy.cli.main import build_parser, main
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
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n")
            answer = raw.recv(4096)  # what the HTTP parser refuses is answered OpenAI-shaped
        assert answer.startswith(b"HTTP/1.0 400") and b'"code": "malformed_request"' in answer
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


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CTXPROXY_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "proxy", *args],
        cwd=ROOT,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def assert_one_line_exit_2(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and "serving on" not in done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


def test_a_port_in_use_is_one_line_naming_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli("serve", "--port", str(port))
    assert_one_line_exit_2(
        done,
        f"ctxproxy: cannot listen on 127.0.0.1:{port}: Address already in use",
        "--port, CTXPROXY_PORT or [server] port",
    )


def test_a_host_that_cannot_be_listened_on_names_the_host_setting(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[server]\nhost = '192.0.2.1'\n", encoding="utf-8")  # TEST-NET-1
    done = run_cli("serve", "--config", str(config), "--port", str(free_port()))
    assert_one_line_exit_2(done, "cannot listen on 192.0.2.1:", f"[server] host in {config}")


def test_a_bad_error_pattern_is_one_config_line(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[tenants.a.budgets]\nerror_pattern = '('\n", encoding="utf-8")
    done = run_cli("serve", "--config", str(config))
    assert_one_line_exit_2(
        done, f"ctxproxy: config error: {config}: tenants.a.budgets.error_pattern: is not a valid"
    )


def test_a_bad_log_level_in_the_environment_is_one_line() -> None:
    done = run_cli("serve", env={"CTXPROXY_LOG_LEVEL": "LOUD"})
    assert_one_line_exit_2(done, "CTXPROXY_LOG_LEVEL: must be one of DEBUG, INFO")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve", "--port", "99999"], "argument --port: must be an integer from 0 to 65535"),
        (["serve", "--port", "http"], "argument --port: must be an integer from 0 to 65535"),
        (["serve", "--log-level", "LOUD"], "argument --log-level: invalid choice: 'LOUD'"),
        (["sessions", "list", "--limit", "x"], "argument --limit: invalid int value"),
        (["serve", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert len(err.splitlines()) == 1 and expected in err, err


def test_log_level_takes_any_case(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["serve", "--log-level", "warning"])
    assert args.log_level == "WARNING"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"ctxproxy {__version__}"


def test_every_option_of_every_command_has_help() -> None:
    missing = []
    parsers = [("ctxproxy", build_parser())]
    while parsers:
        name, parser = parsers.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend((f"{name} {n}", p) for n, p in action.choices.items())
            elif not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_serve_says_serving_once_bound_and_shutting_down_and_stopped_on_ctrl_c() -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXPROXY_", "OPENAI_"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(f"http://127.0.0.1:{port}/readyz")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=10)
    messages = [json.loads(line)["msg"] for line in err.splitlines()]
    serving = messages.index(f"ctxproxy serving on http://127.0.0.1:{port} (store memory://, "
                             "config <defaults>)")  # fmt: skip
    shutting = next(i for i, m in enumerate(messages) if m.startswith("shutting down"))
    assert messages[shutting] == "shutting down (draining 0 requests, at most 30s)…"
    assert serving < shutting and messages[-1] == "stopped", messages


def test_bootstrap_preview_shows_the_learned_facts_after_the_memory_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ws" / "memory").mkdir(parents=True)
    (tmp_path / "ws" / "memory" / "MEMORY.md").write_text("- 2026-11-01: Curated.\n")
    (tmp_path / "ws" / "memory" / "learned.md").write_text("- 2026-12-03: Learned.\n")
    config = tmp_path / "c.toml"
    config.write_text('[tenants.default]\nworkspace = "ws"\n')
    assert main(["bootstrap", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "<memory_index>\n- 2026-11-01: Curated.\n- 2026-12-03: Learned.\n</memory_index>" in out
    config.write_text(
        '[tenants.default]\nworkspace = "ws"\n[tenants.default.memory]\nenabled = false\n'
    )
    assert main(["bootstrap", "--config", str(config)]) == 0
    assert "Learned" not in capsys.readouterr().out
