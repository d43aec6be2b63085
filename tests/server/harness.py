"""Run ctxproxy in process in front of a fake upstream, driven by the official SDKs."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.settings import Settings
from tests.fakes.openai_upstream import FakeOpenAI

EXAMPLE_WORKSPACE = Path(__file__).resolve().parents[2] / "config" / "workspaces" / "default"

TEMPLATE = """
[server]
max_body_bytes = {max_body_bytes}
admin_keys = {admin_keys}

[store]
url = "{store_url}"
key_prefix = "{key_prefix}"
op_timeout_s = {store_op_timeout_s}

[upstreams.fake]
kind = "{upstream_kind}"
base_url = "{upstream}{upstream_path}"
api_key_env = "FAKE_UPSTREAM_KEY"
cache_style = "{cache_style}"
first_byte_timeout_s = {first_byte_timeout_s}
idle_timeout_s = {idle_timeout_s}
timeout_s = {timeout_s}
{upstream_extra}

[tenants.default]
workspace = "ws"
upstream = "fake"
{tenant_extra}
"""


@dataclass
class Proxy:
    fake: FakeOpenAI
    server: TestServer
    app: web.Application
    settings: Settings
    workspace: Path

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))

    def client(self, api_key: str = "sk-client", **kw: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key, max_retries=0, **kw)

    def sync_client(self, api_key: str = "sk-client") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=api_key, max_retries=0)


def write_config(tmp: Path, *, upstream: str, workspace: bool = True, **values: Any) -> Path:
    defaults: dict[str, Any] = {
        "max_body_bytes": 33_554_432,
        "admin_keys": "[]",
        "store_url": "memory://",
        "key_prefix": "ctxproxy:",
        # 2 s, not the product's 0.5: a test about behaviour must not go degraded because a loaded
        # machine answered slowly once; the fault suites (tests/reliability) set 0.5 themselves
        "store_op_timeout_s": 2.0,
        "cache_style": "openai",
        "first_byte_timeout_s": 30,
        "idle_timeout_s": 30,
        "timeout_s": 60,
        "tenant_extra": "",
        "upstream_extra": "",  # e.g. 'api = "responses"'
        "upstream_kind": "openai",  # "anthropic": base_url is the fake's root (upstream_path "")
        "upstream_path": "/v1",
    }
    defaults.update(values)
    ws = tmp / "ws"
    if workspace and not ws.exists():
        shutil.copytree(EXAMPLE_WORKSPACE, ws)
    ws.mkdir(exist_ok=True)
    path = tmp / "ctxproxy.toml"
    path.write_text(TEMPLATE.format(upstream=upstream, **defaults), encoding="utf-8")
    return path
