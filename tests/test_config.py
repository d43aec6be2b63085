"""Config loading: every key checked once, errors name the key and the file."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from proxy.config import (
    STAGES,
    cli_key,
    cli_log_level,
    default_settings,
    load_settings,
)
from proxy.errors import ConfigError
from proxy.memory.ledger import MemorySettings
from proxy.recall.tool import RecallSettings
from proxy.settings import ServerSettings, check_workers_share_a_store, parse_store_url

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
    assert tenant.memory == MemorySettings(enabled=True, scope="tenant", max_lines=200)
    assert settings.server.prices == str(EXAMPLE.parent / "prices.toml")  # found beside it
    assert tenant.recall == RecallSettings()
    assert tenant.compact.keep_first_user and tenant.compact.keep_first_user_max_chars == 8000


def test_recall_and_keep_first_user_are_read_from_their_tables(tmp_path: Path) -> None:
    text = (
        "[tenants.a.recall]\nenabled = false\ntool_name = 'fetch_cut'\n"
        "max_result_chars = 5000\nmax_rounds = 1\n"
        "[tenants.a.compact]\nkeep_first_user = false\nkeep_first_user_max_chars = 300\n"
    )
    tenant = load_settings(write(tmp_path, text), environ={}).tenants["a"]
    assert tenant.recall == RecallSettings(
        enabled=False, tool_name="fetch_cut", max_result_chars=5000, max_rounds=1
    )
    assert not tenant.compact.keep_first_user
    assert tenant.compact.keep_first_user_max_chars == 300


def test_prices_resolve_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "p.toml").write_text("", encoding="utf-8")
    settings = load_settings(write(tmp_path, '[server]\nprices = "tables/p.toml"\n'), environ={})
    assert settings.server.prices == str(tmp_path.resolve() / "tables" / "p.toml")


def test_without_a_prices_key_or_a_table_beside_the_config_nothing_is_priced(
    tmp_path: Path,
) -> None:
    assert load_settings(write(tmp_path, ""), environ={}).server.prices == ""


def test_a_missing_price_table_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist") as caught:
        load_settings(write(tmp_path, '[server]\nprices = "nope.toml"\n'), environ={})
    assert "server.prices" in str(caught.value)


def test_no_config_means_embedded_store_default_tenant_and_openai_env() -> None:
    settings = load_settings(None, environ={"OPENAI_BASE_URL": "http://up/v1"})
    assert settings.store.url == "memory://"
    assert (settings.server.host, settings.server.port) == ("127.0.0.1", 8787)
    assert settings.upstreams["openai"].base_url == "http://up/v1"
    assert list(settings.tenants) == ["default"]
    assert settings.tenants["default"].forward_client_key


def test_only_a_configured_tenant_learns_facts_by_default(tmp_path: Path) -> None:
    """The implicit tenant takes any bearer: what one client taught it would reach the next."""
    assert not load_settings(None, environ={}).tenants["default"].memory.enabled
    implicit = load_settings(write(tmp_path, "[server]\nport = 9000\n"), environ={})
    assert not implicit.tenants["default"].memory.enabled
    configured = load_settings(write(tmp_path, "[tenants.a]\n"), environ={})
    assert configured.tenants["a"].memory == MemorySettings()
    session = load_settings(write(tmp_path, "[tenants.a.memory]\nscope = 'session'\n"), environ={})
    assert session.tenants["a"].memory.scope == "session"


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
        ("[tenants.a.recall]\nwhatever = 1\n", "tenants.a.recall.whatever"),
        ("[tenants.a.prune]\nrecall_tool = 'x'\n", "tenants.a.prune.recall_tool"),
        ("[tenants.a.compact]\nrecall_tool = 'x'\n", "tenants.a.compact.recall_tool"),
    ],
)
def test_bad_config_names_the_key_and_the_file(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == key
    assert caught.value.file == str(path)


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ("[tenants.a.compact]\nkeep_recent = -1\n", "compact.keep_recent", "must be 0 or more"),
        (
            "[tenants.a.compact]\nsoft_ratio = 2.0\n",
            "compact.soft_ratio",
            "must be between 0 and 1 (above 0, at most 1)",
        ),
        (
            "[tenants.a.budgets]\nerror_pattern = '('\n",
            "budgets.error_pattern",
            "is not a valid regular expression: missing ), unterminated subpattern at position 0",
        ),
        ("[tenants.a.prune]\nmax_chars = -5\n", "prune.max_chars", "must be 0 or more"),
        ("[tenants.a.cache]\nttl = '1d'\n", "cache.ttl", 'must be "5m" or "1h"'),
        (
            "[tenants.a.recall]\ntool_name = 'recall me'\n",
            "recall.tool_name",
            "must be 1 to 64 of the characters A-Z a-z 0-9 _ -",
        ),
        (
            "[tenants.a.recall]\nmax_result_chars = 10\n",
            "recall.max_result_chars",
            "must be at least 1000",
        ),
        ("[tenants.a.recall]\nmax_rounds = 0\n", "recall.max_rounds", "must be at least 1"),
        (
            "[tenants.a.compact]\nkeep_first_user_max_chars = 50\n",
            "compact.keep_first_user_max_chars",
            "must be at least 200",
        ),
        ("[tenants.a.memory]\nmax_lines = 0\n", "memory.max_lines", "must be at least 1"),
        ("[tenants.a.memory]\nscope = 'user'\n", "memory.scope", 'must be "tenant" or "session"'),
        ("[tenants.a.memory]\nforever = true\n", "memory.forever", "unknown key"),
    ],
)
def test_value_rejected_by_a_stage_names_its_key_and_the_rule(
    tmp_path: Path, text: str, key: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == f"tenants.a.{key}"
    assert str(caught.value) == f"{path}: tenants.a.{key}: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tenants.a.compact]\nthreshold_tokens = 'soon'\n", 'must be an integer or "auto"'),
        ("[tenants.a.compact]\nmode = 'later'\n", 'must be "sync" or "async"'),
        ("[tenants.a.prune]\nexclude_tools = ['ok', 1]\n", "must be a list of strings"),
        ("[tenants.a.prune]\nwhen_cache_cold_s = 'x'\n", "must be a number"),
        ("[tenants.a]\nmodel_window = 1.5\n", "must be an integer"),
        ("[tenants.a]\nforward_client_key = 'yes'\n", "must be true or false"),
        ("[tenants.a]\nreport_usage = 'billed'\n", 'must be "upstream" or "client"'),
        ("[upstreams.u]\nmax_output_tokens = 'many'\n[tenants.a]\nupstream = 'u'\n",
         "must be an integer"),
        ("[tenants.a]\nmessages_markers_stop_pruning = 1\n", "must be true or false"),
        ("[tenants.a]\nworkspace = ''\n", "must be a path"),
        ("[upstreams.u]\ncache_style = 'x'\n[tenants.a]\nupstream = 'u'\n",
         'must be "openai", "anthropic" or "none"'),
        ("[server]\nport = 99999\n", "must be between 0 and 65535"),
        ("[tenants.a.recall]\nenabled = 'yes'\n", "must be true or false"),
        ("[tenants.a.recall]\nmax_rounds = 2.5\n", "must be an integer"),
        ("[tenants.a.compact]\nkeep_first_user = 1\n", "must be true or false"),
    ],
)  # fmt: skip
def test_type_errors_read_in_plain_words(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert str(caught.value).endswith(f": {message}")


def test_every_settings_type_is_described_in_plain_words() -> None:
    from dataclasses import fields
    from typing import get_type_hints

    from proxy.config_tables import describe
    from proxy.settings import ServerSettings, StoreSettings, TenantSettings, UpstreamSettings

    classes = [ServerSettings, StoreSettings, UpstreamSettings, TenantSettings]
    classes += [type(getattr(TenantSettings(), stage)) for stage in STAGES]
    seen = set()
    for cls in classes:
        for name, hint in get_type_hints(cls).items():
            if name in {f.name for f in fields(cls)} and name not in STAGES:
                words = describe(hint)
                seen.add(words)
                assert words and not re.search(r"typing|Union|Literal|None|\[|<|'", words), words
    assert {'an integer or "auto"', "a list of strings", "true or false", "a path"} <= seen


def test_a_config_with_only_a_server_table_serves_the_default_tenant(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\nport = 9000\n")
    settings = load_settings(path, environ={"OPENAI_BASE_URL": "http://up/v1"})
    assert settings.server.port == 9000
    assert list(settings.tenants) == ["default"]
    assert settings.tenants["default"].upstream == "openai"
    assert settings.upstreams["openai"].base_url == "http://up/v1"


def test_without_tenants_the_only_upstream_serves_the_default_tenant(tmp_path: Path) -> None:
    path = write(tmp_path, "[upstreams.claude]\nkind = 'anthropic'\n")
    assert load_settings(path, environ={}).tenants["default"].upstream == "claude"
    two = "[upstreams.a]\n[upstreams.b]\n"
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, two), environ={})
    assert caught.value.key == "tenants"


def test_a_port_out_of_range_in_the_environment_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, environ={"CTXPROXY_PORT": "99999"})
    assert caught.value.key == "CTXPROXY_PORT"


def test_relative_paths_are_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(
        tmp_path, "[tenants.a]\nworkspace = 'ws'\n[tenants.a.bootstrap]\nmanaged_dir = 'm'\n"
    )
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(EXAMPLE.parents[1])  # a folder holding config/workspaces/default
    tenant = load_settings(path, environ={}).tenants["a"]
    assert tenant.workspace == (tmp_path / "ws").resolve()
    assert tenant.bootstrap.managed_dir == str((tmp_path / "m").resolve())


@pytest.mark.parametrize("folder", ["repository root", "elsewhere"])
def test_no_config_gives_the_default_tenant_no_workspace_from_any_folder(
    folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(EXAMPLE.parents[1] if folder == "repository root" else tmp_path)
    assert load_settings(None, environ={}).tenants["default"].workspace is None


def test_a_tenant_without_a_workspace_key_has_no_workspace(tmp_path: Path) -> None:
    path = write(tmp_path, "[tenants.a]\n")
    assert load_settings(path, environ={}).tenants["a"].workspace is None


@pytest.mark.parametrize("problem", ["does not exist", "is not a folder"])
def test_a_workspace_that_is_missing_or_a_file_is_a_config_error_naming_key_and_path(
    problem: str, tmp_path: Path
) -> None:
    path = write(tmp_path, "[tenants.a]\nworkspace = 'ws'\n")
    if problem == "is not a folder":
        (tmp_path / "ws").write_text("not a folder", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == "tenants.a.workspace"
    assert str(caught.value) == f"{path}: tenants.a.workspace: {tmp_path / 'ws'} {problem}"


def test_serve_with_a_missing_workspace_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from proxy.cli.main import main

    path = write(tmp_path, "[tenants.a]\nworkspace = 'gone'\n")
    assert main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tenants.a.workspace" in err and str(tmp_path / "gone") in err


def test_cli_exits_non_zero_on_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from proxy.cli.main import main

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
    ("url", "kind", "nodes", "service", "db", "tls"),
    [
        ("memory://", "memory", (), "", 0, False),
        ("redis://r:6379/4", "redis", (), "", 0, False),
        ("unix:///run/redis.sock?db=2", "redis", (), "", 0, False),
        ("redis+cluster://a:7000", "cluster", (("a", 7000),), "", 0, False),
        (
            "rediss+cluster://:pw@a:7000,b:7001,[::1]:7002/",
            "cluster",
            (("a", 7000), ("b", 7001), ("::1", 7002)),
            "",
            0,
            True,
        ),
        (
            "redis+sentinel://s1:26379,s2:26380/main",
            "sentinel",
            (("s1", 26379), ("s2", 26380)),
            "main",
            0,
            False,
        ),
        ("redis+sentinel://s1:26379/main/5", "sentinel", (("s1", 26379),), "main", 5, False),
    ],
)
def test_store_urls_of_each_kind(
    url: str, kind: str, nodes: tuple[tuple[str, int], ...], service: str, db: int, tls: bool
) -> None:
    address = parse_store_url(url)
    assert (address.kind, address.nodes, address.service, address.db, address.tls) == (
        kind, nodes, service, db, tls,
    )  # fmt: skip


def test_store_url_credentials_are_read_and_never_shown() -> None:
    address = parse_store_url("redis+cluster://user:p%40ss@a:7000")
    assert (address.username, address.password) == ("user", "p@ss")
    assert "p@ss" not in repr(address)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://x", "must be one of memory://"),
        ("redis+cluster://a:7000/0", "a Redis Cluster has database 0 only: remove '/0'"),
        ("redis+cluster://a:7000/3", "remove '/3'"),
        ("redis+cluster://a", "needs host:port for every node, not 'a'"),
        ("redis+cluster://a:7000,:7001", "needs host:port for every node"),
        ("redis+cluster://a:7000?ssl_cert_reqs=none", "takes no options"),
        ("redis+sentinel://s:26379", "must name the service"),
        ("redis+sentinel://s:26379/main/x", "must name the service"),
        ("redis://r:port/0", "has a bad port"),
        ("redis://r:6379/zero", "database must be a number"),
    ],
)
def test_a_bad_store_url_is_one_line_naming_store_url(tmp_path: Path, url: str, says: str) -> None:
    path = write(tmp_path, f"[store]\nurl = '{url}'\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == "store.url"
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_store_url_in_the_environment_names_the_variable() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, environ={"CTXPROXY_STORE_URL": "redis+cluster://a:1/2"})
    assert (caught.value.key, caught.value.file) == ("CTXPROXY_STORE_URL", "<environment>")


def test_workers_need_a_shared_store(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\nworkers = 2\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == "server.workers"
    assert "2 workers need a shared store" in str(caught.value)
    shared = load_settings(path, environ={"CTXPROXY_STORE_URL": "redis+cluster://a:7000"})
    assert shared.server.workers == 2
    with pytest.raises(ConfigError) as flag:
        check_workers_share_a_store(
            replace(default_settings({}), server=ServerSettings(workers=3)), from_flag=True
        )
    assert flag.value.key == "--workers"


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


def test_serve_with_a_malformed_price_table_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from proxy.cli.main import main

    (tmp_path / "prices.toml").write_text('[models."m"]\ninput = -1\n', encoding="utf-8")
    assert main(["serve", "--config", str(write(tmp_path, ""))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "server.prices" in err and "models.'m'" in err


def test_cache_diagnostics_on_an_upstream_not_anthropic_is_one_config_error(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[upstreams.gw]\nkind = "openai"\ncache_diagnostics = true\n')
    with pytest.raises(ConfigError) as refused:
        load_settings(path, environ={})
    assert str(refused.value) == (
        f'{path}: upstreams.gw.cache_diagnostics: is for kind = "anthropic" only (an '
        "OpenAI-compatible upstream's chat completions have no cache-miss diagnostics)"
    )
    anthropic = '[upstreams.c]\nkind = "anthropic"\ncache_diagnostics = true\n'
    assert load_settings(write(tmp_path, anthropic), environ={}).upstreams["c"].cache_diagnostics
    off = '[upstreams.gw]\nkind = "openai"\ncache_diagnostics = false\n'
    assert not load_settings(write(tmp_path, off), environ={}).upstreams["gw"].cache_diagnostics


def test_the_cache_prewarm_is_off_unless_a_tenant_turns_it_on(tmp_path: Path) -> None:
    assert load_settings(None, environ={}).tenants["default"].cache.prewarm is False
    on = load_settings(write(tmp_path, "[tenants.a.cache]\nprewarm = true\n"), environ={})
    assert on.tenants["a"].cache.prewarm is True
    bad = write(tmp_path, "[tenants.a.cache]\nprewarm = 'yes'\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(bad, environ={})
    assert str(caught.value) == f"{bad}: tenants.a.cache.prewarm: must be true or false"
