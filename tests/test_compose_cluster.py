"""docker-compose.cluster.yml: six Redis Cluster nodes joined once, two proxies on the cluster,
nginx in front; the file, the config it mounts and the load balancer's config agree.

Docker does not run where the suite runs: these check the file, not a running stack."""

from __future__ import annotations

import ipaddress
import re
from pathlib import PurePosixPath
from typing import Any

import pytest
import yaml

from proxy.config import load_settings
from proxy.settings import Settings, parse_store_url
from tests.test_compose import ROOT, host_path, mounts

PROXIES = ("proxy-a", "proxy-b")
NODES = tuple(f"redis-{n}" for n in range(1, 7))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.cluster.yml").read_text())
    return loaded


@pytest.fixture(scope="module")
def settings(compose: dict[str, Any]) -> Settings:
    proxy = compose["services"]["proxy-a"]
    config = PurePosixPath(proxy["environment"]["CTXPROXY_CONFIG"])
    return load_settings(host_path(proxy, config), environ={})


def address(service: dict[str, Any]) -> str:
    return str(service["networks"]["cluster"]["ipv4_address"])


def test_six_cluster_nodes_with_their_own_volume_address_and_persistence(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert set(services) == {*NODES, "redis-cluster", *PROXIES, "lb"}
    subnet = ipaddress.ip_network(compose["networks"]["cluster"]["ipam"]["config"][0]["subnet"])
    seen = set()
    for name in NODES:
        node = services[name]
        command = node["command"]
        assert command[:3] == ["redis-server", "--cluster-enabled", "yes"]
        assert "--appendonly" in command and command[command.index("--appendonly") + 1] == "yes"
        volume, target = node["volumes"][0].split(":")
        assert target == "/data" and volume in compose["volumes"]
        assert ipaddress.ip_address(address(node)) in subnet
        seen.add(address(node))
    assert len(seen) == 6


def test_the_cluster_is_created_once_from_all_six_with_a_replica_each(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    init = services["redis-cluster"]
    script = init["command"][-1]
    assert "cluster_state:ok" in script  # a later start finds the cluster formed
    created = re.findall(r"(\d+\.\d+\.\d+\.\d+):6379", script.split("--cluster create")[1])
    assert created == [address(services[name]) for name in NODES]
    assert "--cluster-replicas 1 --cluster-yes" in script
    assert all(init["depends_on"][n]["condition"] == "service_healthy" for n in NODES)


def test_the_proxies_serve_on_the_cluster_with_workers(
    compose: dict[str, Any], settings: Settings
) -> None:
    services = compose["services"]
    store = parse_store_url(settings.store.url)
    assert store.kind == "cluster"
    nodes = {address(services[name]) for name in NODES}
    assert {host for host, _ in store.nodes} <= nodes and all(p == 6379 for _, p in store.nodes)
    assert settings.server.workers > 1 and settings.server.host == "0.0.0.0"
    for name in PROXIES:
        proxy = services[name]
        assert proxy["depends_on"]["redis-cluster"]["condition"] == (
            "service_completed_successfully"
        )
        assert "ports" not in proxy, "only the load balancer is published"
        assert int(proxy["stop_grace_period"].removesuffix("s")) > settings.server.drain_timeout_s
        assert all(path.exists() for path in mounts(proxy).values())
        assert proxy["environment"] == services["proxy-a"]["environment"]


def test_the_load_balancer_passes_streams_to_both_proxies(
    compose: dict[str, Any], settings: Settings
) -> None:
    lb = compose["services"]["lb"]
    [mapping] = lb["ports"]
    assert mapping.startswith("127.0.0.1:"), "an open tenant is published beyond loopback"
    host, target = lb["volumes"][0].split(":")[:2]
    assert target == "/etc/nginx/nginx.conf"
    conf = (ROOT / host).read_text("utf-8")
    port = settings.server.port
    assert re.findall(r"server (\S+):(\d+)", conf) == [(p, str(port)) for p in PROXIES]
    assert "proxy_buffering off;" in conf and f"listen {mapping.split(':')[-1]};" in conf
    assert "proxy_next_upstream error;" in conf  # never a request already sent
    size = int(re.search(r"client_max_body_size (\d+)m;", conf)[1])  # type: ignore[index]
    assert size * 1024 * 1024 >= settings.server.max_body_bytes
    assert all(lb["depends_on"][p]["condition"] == "service_healthy" for p in PROXIES)
