"""End-to-end fixtures: the proxy in process in front of fake upstreams (see tests/server)."""

from __future__ import annotations

from tests.server.conftest import make_proxy as make_proxy
