"""A real local Redis Cluster (three primaries, three replicas) and a real Sentinel set (a
primary, a replica, three sentinels), started by the test suite on free loopback ports.

Both are made for failover tests: the cluster's node timeout and the sentinels'
down-after-milliseconds are short (`NODE_TIMEOUT_MS`, `DOWN_AFTER_MS`), so a killed primary is
replaced within a few seconds.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

from tests.redis_server import RedisServer, free_port

NODE_TIMEOUT_MS = 2000
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000
SERVICE = "ctxmain"


def command(port: int, *args: str, timeout: float = 2.0) -> str:
    """One command to a server on 127.0.0.1 (RESP, as `redis-cli` would send it); its reply as
    text (an error reply raises)."""
    packed = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(packed.encode())
        return _read_reply(sock.makefile("rb"))


def _read_reply(stream: socket.SocketIO | object) -> str:
    line = stream.readline()  # type: ignore[attr-defined]
    kind, rest = line[:1], line[1:].rstrip(b"\r\n").decode()
    if kind in (b"+", b":"):
        return rest
    if kind == b"-":
        raise RuntimeError(rest)
    if kind == b"$":
        size = int(rest)
        return "" if size < 0 else stream.read(size + 2)[:-2].decode()  # type: ignore[attr-defined]
    if kind == b"*":
        count = int(rest)
        return "\n".join(_read_reply(stream) for _ in range(max(count, 0)))
    raise RuntimeError(f"unexpected reply {line!r}")


def _low_port() -> int:
    """A free port a cluster node may use: at most 55535 (Redis refuses higher ones, as its
    default bus port is 10000 above; the bus port is set apart with `--cluster-port`)."""
    while True:
        port = free_port()
        if port <= 55535:
            return port


def redis_cli(*args: str) -> str:
    binary = shutil.which("redis-cli")
    if binary is None:
        raise RuntimeError("redis-cli not found; install Redis to run the cluster tests")
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"redis-cli {' '.join(args)}: {done.stdout} {done.stderr}")
    return done.stdout


def wait_for(check: object, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except (OSError, RuntimeError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


@dataclass
class RedisCluster:
    """Six `redis-server --cluster-enabled yes`, joined by `redis-cli --cluster create`."""

    promoted_at: float = 0.0
    """When a replica took a killed primary's place (`time.monotonic()`); 0 until then."""
    nodes: list[RedisServer] = field(
        default_factory=lambda: [RedisServer(port=_low_port()) for _ in range(6)]
    )

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[:3])

    def start(self) -> None:
        for node in self.nodes:
            node.start(
                "--cluster-enabled", "yes",
                "--cluster-config-file", f"nodes-{node.port}.conf",
                "--cluster-port", str(free_port()),
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                "--cluster-replica-validity-factor", "0",
                "--repl-diskless-sync", "no",
            )  # fmt: skip
        redis_cli(
            "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
            "--cluster-replicas", "1", "--cluster-yes",
        )  # fmt: skip
        wait_for(self.healthy, "cluster_state:ok and a replica for each primary")

    def healthy(self) -> bool:
        live = self.live()
        if not all("cluster_state:ok" in command(n.port, "CLUSTER", "INFO") for n in live):
            return False
        roles = [self.role(n) for n in live]
        synced = all(
            _link_up(n.port) for n, role in zip(live, roles, strict=True) if role == "slave"
        )
        return synced and roles.count("master") == 3 and roles.count("slave") >= len(live) - 3

    def live(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.proc is not None]

    def role(self, node: RedisServer) -> str:
        return command(node.port, "ROLE").split("\n", 1)[0]

    def primaries(self) -> list[RedisServer]:
        return [n for n in self.live() if self.role(n) == "master"]

    def slot_of(self, key: str) -> int:
        return int(command(self.live()[0].port, "CLUSTER", "KEYSLOT", key))

    def primary_of(self, key: str) -> RedisServer:
        slot = self.slot_of(key)
        for node in self.primaries():
            if _owns(node, slot):
                return node
        raise RuntimeError(f"no primary owns slot {slot}")

    def move_slot_of(self, key: str, source: RedisServer, target: RedisServer) -> None:
        """Migrate the slot of `key` from `source` to `target` as `redis-cli --cluster reshard`
        does (IMPORTING/MIGRATING, `MIGRATE` key by key, then the slot's new owner), slowly
        enough for requests to meet the migration."""
        slot = str(self.slot_of(key))
        source_id = command(source.port, "CLUSTER", "MYID")
        target_id = command(target.port, "CLUSTER", "MYID")
        command(target.port, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        command(source.port, "CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        while keys := command(source.port, "CLUSTER", "GETKEYSINSLOT", slot, "1"):
            command(source.port, "MIGRATE", "127.0.0.1", str(target.port), "", "0", "5000",
                    "KEYS", *keys.split("\n"))  # fmt: skip
            time.sleep(0.1)
        for node in self.primaries():
            command(node.port, "CLUSTER", "SETSLOT", slot, "NODE", target_id)

    def kill(self, node: RedisServer) -> None:
        assert node.proc is not None
        node.proc.kill()
        node.proc.wait()
        node.proc = None
        self.promoted_at = 0.0
        threading.Thread(target=self._watch_promotion, daemon=True).start()

    def _watch_promotion(self) -> None:
        """Note when a replica has taken the killed primary's place (`promoted_at`)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if len(self.primaries()) == 3:
                    self.promoted_at = time.monotonic()
                    return
            except (OSError, RuntimeError):
                pass
            time.sleep(0.02)

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc is not None:
                node.resume()
                node.stop()


def _link_up(port: int) -> bool:
    """Whether a replica has synced with its primary (a failover before that loses data)."""
    return "master_link_status:up" in command(port, "INFO", "replication")


def _owns(node: RedisServer, slot: int) -> bool:
    """Whether `node` serves `slot` as a primary (from its own `CLUSTER NODES` line)."""
    for line in command(node.port, "CLUSTER", "NODES").splitlines():
        parts = line.split()
        if "myself" in parts[2]:
            for span in parts[8:]:
                if span.startswith("["):
                    continue
                low, _, high = span.partition("-")
                if int(low) <= slot <= int(high or low):
                    return True
    return False


@dataclass
class SentinelSet:
    """A primary, a replica of it and three sentinels watching them as `SERVICE`."""

    primary: RedisServer = field(default_factory=RedisServer)
    replica: RedisServer = field(default_factory=RedisServer)
    sentinels: list[int] = field(default_factory=lambda: [free_port() for _ in range(3)])
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return (
            "redis+sentinel://"
            + ",".join(f"127.0.0.1:{p}" for p in self.sentinels)
            + (f"/{SERVICE}")
        )

    def start(self) -> None:
        self.primary.start("--repl-diskless-sync", "no")
        self.replica.start(
            "--replicaof", "127.0.0.1", str(self.primary.port), "--repl-diskless-sync", "no"
        )
        binary = shutil.which("redis-server")
        assert binary is not None
        for port in self.sentinels:
            conf = f"{self.primary.workdir}/sentinel-{port}.conf"
            with open(conf, "w", encoding="utf-8") as file:
                file.write(
                    f"port {port}\nbind 127.0.0.1\ndir {self.primary.workdir}\n"
                    f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                    f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                    f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
                    f"sentinel parallel-syncs {SERVICE} 1\n"
                )
            self.procs.append(
                subprocess.Popen(
                    [binary, conf, "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        wait_for(self._watching, "three sentinels watching the primary and its replica")

    def _watching(self) -> bool:
        for port in self.sentinels:
            reply = command(port, "SENTINEL", "MASTER", SERVICE).split("\n")
            state = dict(zip(reply[::2], reply[1::2], strict=False))
            if state.get("num-other-sentinels") != "2" or state.get("num-slaves") != "1":
                return False
        return _link_up(self.replica.port)

    def kill_primary(self) -> None:
        """Kill the primary: the sentinels promote the replica."""
        assert self.primary.proc is not None
        self.primary.proc.kill()
        self.primary.proc.wait()
        self.primary.proc = None

    def master_port(self) -> int:
        reply = command(self.sentinels[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(reply.split("\n")[1])

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.wait(timeout=10)
        self.procs.clear()
        for server in (self.primary, self.replica):
            if server.proc is not None:
                server.resume()
                server.stop()
