"""Where `ctxproxy sessions` and `ctxproxy memory` read: a flag's store or proxy, else the
config's."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.cli.main import build_parser
from proxy.cli.source import Place, where_to_read


@pytest.mark.parametrize("command", [["sessions", "list"], ["memory", "show", "--tenant", "t"]])
def test_a_flag_names_the_place_and_the_config_is_not_read(command: list[str]) -> None:
    parser, environ = build_parser(), {"CTXPROXY_KEY": "k", "CTXPROXY_CONFIG": "/nowhere.toml"}
    redis = parser.parse_args([*command, "--redis", "redis://r:6379"])
    assert where_to_read(redis, environ=environ) == Place(
        "redis://r:6379", redis=True, prefix="ctxproxy:"
    )
    url = parser.parse_args([*command, "--url", "http://p:1"])
    assert where_to_read(url, environ=environ) == Place("http://p:1", redis=False, key="k")


def test_the_config_names_its_redis_store_or_else_the_proxy_it_serves(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[server]\nhost = '0.0.0.0'\nport = 9100\n", encoding="utf-8")
    args = build_parser().parse_args(["sessions", "list", "--config", str(path)])
    assert where_to_read(args, environ={}) == Place("http://127.0.0.1:9100", redis=False)
    path.write_text("[store]\nurl = 'redis://r:6379/2'\nkey_prefix = 'x:'\n", encoding="utf-8")
    place = where_to_read(args, environ={})
    assert (place.url, place.redis, place.prefix) == ("redis://r:6379/2", True, "x:")
    assert place.settings is not None and place.settings.store.key_prefix == "x:"
