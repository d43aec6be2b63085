"""The Responses API's settings: an upstream's `api`, the handle secret from `secret_env`
(checked, never shown), a tenant's `report_usage`; the documented example's defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config import load_settings
from proxy.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "ctxproxy.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_documented_example_sends_responses_as_chat_and_reports_the_upstreams_usage() -> None:
    settings = load_settings(EXAMPLE, environ={})
    assert settings.upstreams["openai"].api == "chat"
    assert settings.tenants["default"].report_usage == "upstream"
    assert settings.server.secret_env is None


def test_the_responses_settings_load_and_check(tmp_path: Path) -> None:
    text = (
        '[server]\nsecret_env = "HANDLE_SECRET"\n'
        '[upstreams.native]\nkind = "openai"\napi = "responses"\n'
        '[tenants.a]\nupstream = "native"\nreport_usage = "client"\n'
    )
    settings = load_settings(write(tmp_path, text), environ={"HANDLE_SECRET": "s" * 40})
    assert settings.server.secret == "s" * 40 and "s" * 40 not in repr(settings.server)
    assert settings.upstreams["native"].api == "responses"
    assert settings.tenants["a"].report_usage == "client"
    assert load_settings(write(tmp_path, "[tenants.a]\n"), environ={}).server.secret is None
    with pytest.raises(ConfigError, match=r"server\.secret_env: names a variable that is unset"):
        load_settings(write(tmp_path, text), environ={"HANDLE_SECRET": "short"})
    with pytest.raises(ConfigError, match=r"server\.secret: unknown key"):
        load_settings(write(tmp_path, '[server]\nsecret = "inline"\n'), environ={})
    anthropic = '[upstreams.c]\nkind = "anthropic"\napi = "responses"\n'
    with pytest.raises(ConfigError, match=r"upstreams\.c\.api: \"responses\" is for kind"):
        load_settings(write(tmp_path, anthropic), environ={})
    with pytest.raises(ConfigError, match=r"tenants\.a\.report_usage: must be"):
        load_settings(write(tmp_path, '[tenants.a]\nreport_usage = "both"\n'), environ={})
