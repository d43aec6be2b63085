"""docker-compose.yml, the Dockerfile and the config they mount agree with each other."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from proxy.config import load_settings
from proxy.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text("utf-8"))
    return loaded


def mounts(service: dict[str, Any]) -> dict[PurePosixPath, Path]:
    """Container path -> host path of every bind mount (named volumes excluded)."""
    found = {}
    for volume in service.get("volumes", []):
        host, container, *_ = volume.split(":")
        if host.startswith("."):
            found[PurePosixPath(container)] = ROOT / host
    return found


def host_path(service: dict[str, Any], container: PurePosixPath) -> Path:
    for target, host in mounts(service).items():
        if container == target or target in container.parents:
            return host / container.relative_to(target)
    raise AssertionError(f"{container} is not mounted")


@pytest.fixture(scope="module")
def mounted(compose: dict[str, Any]) -> tuple[Settings, PurePosixPath]:
    """The settings the proxy container loads, and where its config file sits in the container."""
    proxy = compose["services"]["ctxproxy"]
    config = PurePosixPath(proxy["environment"]["CTXPROXY_CONFIG"])
    return load_settings(host_path(proxy, config), environ={}), config


def test_services_and_redis_persistence(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    assert set(compose["services"]) == {"ctxproxy", "redis"}
    assert redis["command"][:3] == ["redis-server", "--appendonly", "yes"]
    volume, target = redis["volumes"][0].split(":")
    assert target == "/data" and volume in compose["volumes"]
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    proxy = compose["services"]["ctxproxy"]
    assert proxy["depends_on"]["redis"]["condition"] == "service_healthy"
    assert proxy["build"] == "."


def test_the_proxy_publishes_the_port_its_config_serves_on(
    compose: dict[str, Any], mounted: tuple[Settings, PurePosixPath]
) -> None:
    settings, _ = mounted
    proxy = compose["services"]["ctxproxy"]
    assert settings.server.host == "0.0.0.0"
    [mapping] = proxy["ports"]
    assert mapping.split(":")[-1] == str(settings.server.port)
    if any(not tenant.keys for tenant in settings.tenants.values()):
        # an open tenant spends the upstream key of the compose environment on any caller
        assert mapping.startswith("127.0.0.1:"), "an open tenant is published beyond loopback"
    check = " ".join(proxy["healthcheck"]["test"])
    assert f"127.0.0.1:{settings.server.port}/readyz" in check
    assert int(proxy["stop_grace_period"].removesuffix("s")) > settings.server.drain_timeout_s


def test_the_store_is_the_redis_service_and_upstream_keys_are_passed(
    compose: dict[str, Any], mounted: tuple[Settings, PurePosixPath]
) -> None:
    settings, _ = mounted
    store = urlparse(settings.store.url)
    assert store.scheme == "redis" and store.hostname in compose["services"]
    assert store.port == 6379
    environment = compose["services"]["ctxproxy"]["environment"]
    for upstream in settings.upstreams.values():
        assert environment[upstream.api_key_env] == f"${{{upstream.api_key_env}:-}}"


def test_every_tenant_workspace_is_mounted_and_exists(
    compose: dict[str, Any], mounted: tuple[Settings, PurePosixPath]
) -> None:
    settings, config = mounted
    proxy = compose["services"]["ctxproxy"]
    for tenant in settings.tenants.values():
        assert tenant.workspace is not None
        relative = tenant.workspace.relative_to(ROOT / "config")  # as written in compose.toml
        in_container = config.parent / PurePosixPath(*relative.parts)
        assert (host_path(proxy, in_container) / "user.md").is_file()


def test_the_image_matches_the_compose_setup(mounted: tuple[Settings, PurePosixPath]) -> None:
    settings, config = mounted
    dockerfile = (ROOT / "Dockerfile").read_text("utf-8")
    assert re.search(rf"^EXPOSE {settings.server.port}$", dockerfile, re.M)
    assert f"ENV CTXPROXY_CONFIG={config}" in dockerfile
    assert "/readyz" in dockerfile and 'CMD ["ctxproxy", "serve"]' in dockerfile


def test_the_build_context_holds_what_the_dockerfile_copies_and_no_more() -> None:
    """.dockerignore is an allowlist (.venv and benchmarks/.venv-* are hundreds of MB)."""
    ignore = (ROOT / ".dockerignore").read_text("utf-8").split()
    assert "*" in ignore
    dockerfile = (ROOT / "Dockerfile").read_text("utf-8")
    copies = re.findall(r"^COPY (.+)$", dockerfile, re.M)
    for line in (c for c in copies if not c.startswith("--from=")):  # a stage's, not the context's
        *sources, _ = line.split()
        for source in sources:
            assert f"!{source}" in ignore and (ROOT / source).exists(), source
