"""`ctxproxy memory show | forget | export` on Redis directly, by the config, and the mistakes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from proxy.adapters.redis.store import RedisStore
from proxy.cli.main import main
from tests.redis_server import RedisServer, free_port

FACTS = ("- 2026-12-01: Sync moves to Wednesdays.", "- 2026-12-02: Rides a gravel bike.")


@pytest.fixture
async def store(redis_server: RedisServer, key_prefix: str) -> AsyncIterator[RedisStore]:
    store = RedisStore(redis_server.url, key_prefix=key_prefix)
    await store.add_facts("team", None, FACTS, max_lines=200)
    await store.add_facts("team", "s1", ["- 2026-12-03: Session fact."], max_lines=200)
    yield store
    await store.close()


def redis_args(redis_server: RedisServer, key_prefix: str) -> list[str]:
    return ["--tenant", "team", "--redis", redis_server.url, "--prefix", key_prefix]


def test_show_prints_the_facts_oldest_first(
    store: RedisStore,
    redis_server: RedisServer,
    key_prefix: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["memory", "show", *redis_args(redis_server, key_prefix)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["2 learned facts of tenant team (oldest first)", *FACTS]
    assert main(["memory", "show", *redis_args(redis_server, key_prefix), "--session", "s1"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["- 2026-12-03: Session fact."]


def test_export_prints_only_markdown_lines_to_append_to_memory_md(
    store: RedisStore,
    redis_server: RedisServer,
    key_prefix: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["memory", "export", *redis_args(redis_server, key_prefix)]) == 0
    assert capsys.readouterr().out == "".join(f"{line}\n" for line in FACTS)


def test_forget_removes_what_the_pattern_matches_and_says_how_many(
    store: RedisStore,
    redis_server: RedisServer,
    key_prefix: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = redis_args(redis_server, key_prefix)
    assert main(["memory", "forget", *args, "GRAVEL"]) == 0
    assert capsys.readouterr().out == "forgot 1 fact of tenant team\n"
    assert main(["memory", "forget", *args, "gravel"]) == 1  # nothing left to match
    assert main(["memory", "show", *args]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == FACTS[0]


def test_an_empty_pattern_forgets_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "forget", "--tenant", "t", "--redis", "redis://x", " "]) == 2
    assert "PATTERN must not be empty" in capsys.readouterr().err


def test_the_tenant_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["memory", "show", "--redis", "redis://x"])
    assert caught.value.code == 2 and "--tenant" in capsys.readouterr().err


def test_with_a_config_the_tenants_scope_decides_what_a_session_sees(
    store: RedisStore,
    redis_server: RedisServer,
    key_prefix: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "c.toml"
    text = f'[store]\nurl = "{redis_server.url}"\nkey_prefix = "{key_prefix}"\n[tenants.team]\n'
    config.write_text(text)
    assert (
        main(["memory", "show", "--tenant", "team", "--session", "s1", "--config", str(config)])
        == 0
    )
    assert capsys.readouterr().out.splitlines()[1:] == list(FACTS)  # scope tenant: the tenant's
    config.write_text(text + "[tenants.team.memory]\nscope = 'session'\n")
    assert (
        main(["memory", "show", "--tenant", "team", "--session", "s1", "--config", str(config)])
        == 0
    )
    assert capsys.readouterr().out.splitlines()[1:] == ["- 2026-12-03: Session fact."]


def test_an_unreachable_redis_is_one_line_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    assert main(["memory", "show", "--tenant", "t", "--redis", url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "s3cret" not in err and "cannot reach the facts" in err
