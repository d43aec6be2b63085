"""The servers the overhead benchmark compares, each started as a real subprocess.

A target is a context manager yielding a `Target`: the URL the load generator calls and the pids
whose CPU time counts as the proxy's. A target whose software is missing yields `None` (skipped).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import PYTHON, ROOT, descendants, free_port, running

LITELLM = ROOT / "benchmarks" / ".venv-litellm" / "bin" / "litellm"
WORKSPACE = ROOT / "config" / "workspaces" / "default"
CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    pid: int | None

    def pids(self) -> list[int]:
        return descendants(self.pid) if self.pid else []


@contextlib.contextmanager
def upstream(tmp: Path) -> Iterator[Target]:
    port = free_port()
    argv = [PYTHON, "-m", "benchmarks.upstream", "--port", str(port)]
    with running(argv, port=port, log=tmp / "upstream.log") as proc:
        yield Target("upstream", f"http://127.0.0.1:{port}{CHAT}", proc.pid)


@contextlib.contextmanager
def passthrough(tmp: Path, base: str) -> Iterator[Target]:
    port = free_port()
    argv = [PYTHON, "-m", "benchmarks.passthrough", "--port", str(port), "--upstream", base]
    with running(argv, port=port, log=tmp / "passthrough.log") as proc:
        yield Target("aiohttp pass-through", f"http://127.0.0.1:{port}{CHAT}", proc.pid)


CTXPROXY_TOML = """
[server]
port = {port}
[store]
url = "memory://"
[upstreams.bench]
kind = "openai"
base_url = "{base}"
api_key_env = "BENCH_UPSTREAM_KEY"
cache_style = "openai"
[tenants.default]
workspace = "{workspace}"
upstream = "bench"
model_window = 128000
"""


def ctxproxy_config(tmp: Path, base: str, port: int) -> Path:
    workspace = tmp / "ws"
    if not workspace.exists():
        shutil.copytree(WORKSPACE, workspace)
    path = tmp / "ctxproxy.toml"
    path.write_text(CTXPROXY_TOML.format(port=port, base=base, workspace=workspace))
    return path


@contextlib.contextmanager
def ctxproxy(tmp: Path, base: str, *, store_url: str = "") -> Iterator[Target]:
    """ctxproxy with the embedded store, or with `store_url` (named "ctxproxy + Redis")."""
    port = free_port()
    config = ctxproxy_config(tmp, base, port)
    argv = [PYTHON, "-m", "proxy", "serve", "--config", str(config), "--log-level", "WARNING"]
    env = {"BENCH_UPSTREAM_KEY": "sk-fake"}  # ctxproxy's summarizer needs a key at start-up
    if store_url:
        env["CTXPROXY_STORE_URL"] = store_url
    name = "ctxproxy + Redis" if store_url else "ctxproxy"
    log = tmp / ("ctxproxy-redis.log" if store_url else "ctxproxy.log")
    with running(argv, port=port, log=log, env=env) as proc:
        yield Target(name, f"http://127.0.0.1:{port}{CHAT}", proc.pid)


@contextlib.contextmanager
def ctxproxy_redis(tmp: Path, base: str) -> Iterator[Target | None]:
    """ctxproxy with its state in a redis-server of its own (as Docker Compose runs it); the
    proxy's CPU is measured, not the server's. None without a `redis-server` binary."""
    from benchmarks.redis_trips import redis_server

    with redis_server() as url:
        if url is None:
            yield None
            return
        with ctxproxy(tmp, base, store_url=url) as target:
            yield target


NGINX_CONF = """
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_max_body_size 0;
  client_body_buffer_size 4m;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  upstream fake {{ server 127.0.0.1:{upstream_port}; keepalive 128; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering on;
    }}
  }}
}}
"""


@contextlib.contextmanager
def nginx(tmp: Path, upstream_port: int) -> Iterator[Target | None]:
    binary = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if binary is None:
        yield None
        return
    port = free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=tmp, port=port, upstream_port=upstream_port))
    argv = [binary, "-c", str(conf), "-p", str(tmp), "-g", "daemon off;"]
    with running(argv, port=port, log=tmp / "nginx.log") as proc:
        yield Target("nginx", f"http://127.0.0.1:{port}{CHAT}", proc.pid)


LITELLM_YAML = """
model_list:
  - model_name: gpt-4o-mini
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: {base}
      api_key: sk-fake
litellm_settings:
  telemetry: false
  drop_params: true
"""


@contextlib.contextmanager
def litellm(tmp: Path, base: str) -> Iterator[Target | None]:
    if not LITELLM.exists() or not _litellm_imports():
        yield None
        return
    port = free_port()
    config = tmp / "litellm.yaml"
    config.write_text(LITELLM_YAML.format(base=base))
    argv = [
        str(LITELLM),
        "--config",
        str(config),
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--num_workers",
        "1",
    ]
    env = {
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "NO_DOCS": "True",
        "LITELLM_MASTER_KEY": "sk-bench",  # the load generator's bearer
        "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true",
    }
    with running(argv, port=port, log=tmp / "litellm.log", env=env, timeout=180) as proc:
        yield Target("LiteLLM", f"http://127.0.0.1:{port}{CHAT}", proc.pid)


def _litellm_imports() -> bool:
    python = LITELLM.parent / "python"
    done = subprocess.run(
        [str(python), "-c", "import litellm.proxy.proxy_server"],
        capture_output=True,
        timeout=300,
        check=False,
    )
    return done.returncode == 0
