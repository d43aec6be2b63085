"""Start-up checks on the final settings: an upstream at the proxy's own address is a config
error, named by its key, and `serve` exits 2 with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.cli.main import main
from proxy.cli.preflight import check_upstreams_are_not_self
from proxy.config import load_settings
from proxy.errors import ConfigError


@pytest.mark.parametrize(
    ("host", "base_url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8787/v1"),
        ("127.0.0.1", "http://localhost:8787/v1"),
        ("127.0.0.1", "http://[::1]:8787"),
        ("localhost", "http://127.0.0.2:8787/v1"),
        ("0.0.0.0", "http://127.0.0.1:8787/v1"),
        ("::", "http://LOCALHOST:8787/v1"),
        ("10.1.2.3", "http://10.1.2.3:8787/v1"),
    ],
)
def test_an_upstream_at_the_proxys_own_address_is_a_config_error(host: str, base_url: str) -> None:
    settings = load_settings(None, environ={"OPENAI_BASE_URL": base_url, "CTXPROXY_HOST": host})
    with pytest.raises(ConfigError) as caught:
        check_upstreams_are_not_self(settings)
    assert caught.value.key == "OPENAI_BASE_URL" and base_url in str(caught.value)


@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:8788/v1",
        "http://127.0.0.1/v1",
        "https://localhost/v1",
        "http://10.1.2.3:8787/v1",
        "https://api.openai.com/v1",
        "http://127.0.0.1:notaport/v1",
    ],
)
def test_an_upstream_elsewhere_is_not_the_proxy_itself(base_url: str) -> None:
    check_upstreams_are_not_self(load_settings(None, environ={"OPENAI_BASE_URL": base_url}))


def test_a_configured_upstream_at_the_proxys_own_port_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        "[server]\nport = 9000\n[upstreams.up]\nbase_url = 'http://localhost:9000/v1'\n"
        "[tenants.a]\nupstream = 'up'\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        check_upstreams_are_not_self(load_settings(path, environ={}))
    assert caught.value.key == "upstreams.up.base_url" and caught.value.file == str(path)


def test_serve_pointed_at_itself_exits_2_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8787/v1")
    assert main(["serve", "--port", "8787"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "OPENAI_BASE_URL" in err and "own address" in err
