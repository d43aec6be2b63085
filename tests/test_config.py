"""Config loading: every key checked once, errors name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config import cli_key, cli_log_level, load_settings
from proxy.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "ctxproxy.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_documented_example_loads_with_every_section() -> None:
    settings = load_settings(EXAMPLE, environ={"OPENAI_API_KEY": "sk-x"})
    tenant = settings.tenants["default"]
    assert settings.upstreams["openai"].api_key == "sk-x"
    assert settings.upstreams["claude"].kind == "anthropic"
    assert tenant.workspace == (EXAMPLE.parent / "workspaces" / "default").resolve()
    assert tenant.budgets.command_tools == ("bash", "shell")
    assert tenant.compact.threshold_tokens == 25_000 and tenant.prune.recent_keep == 2
    assert tenant.prune.when_cache_cold_s == 600.0  # the tenant's upstream is OpenAI's


def test_no_config_means_embedded_store_default_tenant_and_openai_env() -> None:
    settings = load_settings(None, environ={"OPENAI_BASE_URL": "http://up/v1"})
    assert settings.store.url == "memory://"
    assert (settings.server.host, settings.server.port) == ("127.0.0.1", 8787)
    assert settings.upstreams["openai"].base_url == "http://up/v1"
    assert list(settings.tenants) == ["default"]
    assert settings.tenants["default"].forward_client_key


def test_environment_overrides_win(tmp_path: Path) -> None:
    env = {
        "CTXPROXY_CONFIG": str(EXAMPLE),
        "CTXPROXY_PORT": "9999",
        "CTXPROXY_HOST": "0.0.0.0",
        "CTXPROXY_STORE_URL": "redis://r:6379/1",
    }
    settings = load_settings(None, environ=env)
    assert settings.server.port == 9999 and settings.server.host == "0.0.0.0"
    assert settings.store.url == "redis://r:6379/1"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[server]\nport = 'x'\n[tenants.a]\n", "server.port"),
        ("[server]\nbogus = 1\n[tenants.a]\n", "server.bogus"),
        ("[store]\nurl = 'http://x'\n[tenants.a]\n", "store.url"),
        ("[tenants.a]\nupstream = 'nope'\n", "tenants.a.upstream"),
        ("[tenants.a]\nkeys = ['not-hex']\n", "tenants.a.keys"),
        ("[tenants.'a/b']\n", "tenants.a/b"),
        ("[tenants.a.prune]\nrecent_keep = 'two'\n", "tenants.a.prune.recent_keep"),
        ("[tenants.a.compact]\nthreshold_tokens = 'soon'\n", "tenants.a.compact.threshold_tokens"),
        ("[tenants.a.compact]\nmode = 'later'\n", "tenants.a.compact.mode"),
        ("[tenants.a.budgets]\ncommand_keep = 'tail'\n", "tenants.a.budgets.command_keep"),
        ("[upstreams.u]\nkind = 'grpc'\n[tenants.a]\nupstream = 'u'\n", "upstreams.u.kind"),
        (
            "[tenants.a.compact]\nsummarizer_upstream = 'x'\n",
            "tenants.a.compact.summarizer_upstream",
        ),
        ("[server\n", "<file>"),
    ],
)
def test_bad_config_names_the_key_and_the_file(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == key
    assert caught.value.file == str(path)


def test_value_rejected_by_a_stage_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "[tenants.a.compact]\nkeep_recent = -1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == "tenants.a.compact"


def test_relative_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    path = write(
        tmp_path, "[tenants.a]\nworkspace = 'ws'\n[tenants.a.bootstrap]\nmanaged_dir = 'm'\n"
    )
    tenant = load_settings(path, environ={}).tenants["a"]
    assert tenant.workspace == (tmp_path / "ws").resolve()
    assert tenant.bootstrap.managed_dir == str((tmp_path / "m").resolve())


def test_cli_exits_non_zero_on_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from proxy.cli import main

    path = write(tmp_path, "[server]\nport = 'x'\n[tenants.a]\n")
    assert main(["bootstrap", "--config", str(path)]) == 2
    assert "server.port" in capsys.readouterr().err


def test_cli_key_comes_from_the_environ_passed_and_the_flag_wins() -> None:
    environ = {"CTXPROXY_KEY": "env-token"}
    assert cli_key(None, environ=environ) == "env-token"
    assert cli_key("flag-token", environ=environ) == "flag-token"
    assert cli_key(None, environ={}) is None


def test_cli_log_level_comes_from_the_environ_passed_else_info() -> None:
    assert cli_log_level({"CTXPROXY_LOG_LEVEL": "DEBUG"}) == "DEBUG"
    assert cli_log_level({}) == "INFO"


@pytest.mark.parametrize(
    ("upstream", "cache", "cold_s"),
    [
        ('kind = "anthropic"', "", 300.0),
        ('kind = "anthropic"', '[tenants.a.cache]\nttl = "1h"\n', 3600.0),
        ('kind = "openai"', "", 600.0),
        ('kind = "openai"\ncache_style = "none"', "", 0.0),
    ],
    ids=["anthropic-5m", "anthropic-1h", "openai", "no-cache"],
)
def test_pruning_waits_for_the_upstreams_cache_to_go_cold_unless_set(
    tmp_path: Path, upstream: str, cache: str, cold_s: float
) -> None:
    base = f"[upstreams.u]\n{upstream}\n[tenants.a]\nupstream = 'u'\n{cache}"
    settings = load_settings(write(tmp_path, base), environ={})
    assert settings.tenants["a"].prune.when_cache_cold_s == cold_s
    own = base + "[tenants.a.prune]\nwhen_cache_cold_s = 42\n"
    settings = load_settings(write(tmp_path, own), environ={})
    assert settings.tenants["a"].prune.when_cache_cold_s == 42.0


def test_defaults_compact_at_25000_tokens_and_prune_once_the_cache_is_cold() -> None:
    tenant = load_settings(None, environ={}).tenants["default"]
    assert tenant.compact.threshold_tokens == 25_000
    assert tenant.prune.when_cache_cold_s == 600.0  # the default upstream is OpenAI's
    assert tenant.prune.min_savings_chars == 0 and tenant.cache.ttl == "5m"
