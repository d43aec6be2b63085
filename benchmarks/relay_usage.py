"""The stream relay's CPU on a stream whose chunks all carry `"usage":null`, against the path
before null usage was copied undecoded, in the same run.

`python -m benchmarks.relay_usage [--chunks 2000] [--rounds 15]` relays an OpenAI-style stream
(`stream_options.include_usage`: `"usage":null` in every chunk, then a usage chunk and
`[DONE]`) through the relay's copier (`proxy.server.stream_relay.Copier`) into a sink that
keeps the bytes, the two copiers taking turns each round; the upstream's reads are one event
each (tokens as they come) or 16 KB (a stream read after a stall). It reports CPU µs per chunk
(best and median of the rounds) and old ÷ new, and checks both relayed the same bytes and usage.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from proxy.server.stream_relay import Copier
from proxy.sse import SSEvent
from proxy.usage import is_usage_only_chunk, usage_from

OLD_MARKERS = (b'"usage"', b'"error"', b"[DONE]")


class OldCopier(Copier):
    """The copier as it was before: any `"usage"` sends an event through the decoder, any
    event holding one is decoded, and once the decoder holds part of an event every later
    read goes through it whole."""

    def feed(self, chunk: bytes) -> bytes:
        plain = self._plain_events(chunk)
        out = bytearray(chunk[:plain])
        for event in self.decoder.feed(chunk[plain:] if plain else chunk):
            if self._keeps(event):
                out += event.raw
            if self.done:
                break
        return bytes(out)

    def _keeps(self, event: SSEvent) -> bool:
        data = event.data
        if data.startswith("[DONE]"):
            self.done = True
            return True
        raw = event.raw
        if not data.startswith("{") or (b'"usage"' not in raw and b'"error"' not in raw):
            return True
        payload = orjson.loads(data)
        if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
            self.failed = True
            return True
        self._usage = usage_from(payload) or self._usage
        if not is_usage_only_chunk(payload):
            return True
        self.usage_final = True
        return not self._drop_usage_chunk

    def _plain_events(self, chunk: bytes) -> int:
        if not self.decoder.idle or b"\r" in chunk:
            return 0
        stop = len(chunk)
        for marker in OLD_MARKERS:
            at = chunk.find(marker, 0, stop)
            if at >= 0:
                stop = at
        end = chunk.rfind(b"\n\n", 0, stop)
        return end + 2 if end >= 0 else 0


class Sink:
    """Stands for the client's response: keeps what the relay writes."""

    def __init__(self) -> None:
        self.out = bytearray()

    async def write(self, data: bytes) -> None:
        self.out += data

    async def write_eof(self) -> None:
        return None


def openai_stream(chunks: int) -> list[bytes]:
    """The events of a `chunks`-chunk answer as OpenAI streams it with include_usage on."""
    base: dict[str, Any] = {
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4o", "system_fingerprint": "fp_bench", "usage": None,
    }  # fmt: skip
    events = []
    for index in range(chunks):
        delta = {"content": f" token{index}"}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        events.append({**base, "choices": [choice]})
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    usage = {"prompt_tokens": 1234, "completion_tokens": chunks, "total_tokens": 1234 + chunks}
    events.append({**base, "choices": [], "usage": usage})
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def reads_of(events: list[bytes], size: int) -> list[bytes]:
    """The stream cut into reads: one event each (`size` 0), else `size` bytes each."""
    if size == 0:
        return events
    whole = b"".join(events)
    return [whole[at : at + size] for at in range(0, len(whole), size)]


async def relay(kind: type[Copier], reads: list[bytes]) -> tuple[float, bytes, Any]:
    """CPU seconds to relay `reads`, the bytes the client got and the usage seen."""
    sink = Sink()
    copier = kind(sink, drop_usage_chunk=True, started=time.monotonic())  # type: ignore[arg-type]

    async def upstream() -> AsyncIterator[bytes]:
        for read in reads:
            yield read

    started = time.process_time()
    await copier.copy(upstream())
    cpu = time.process_time() - started
    return cpu, bytes(sink.out), copier.relayed(completed=True).usage


async def measure(chunks: int, rounds: int, size: int) -> dict[str, float]:
    reads = reads_of(openai_stream(chunks), size)
    times: dict[str, list[float]] = {"old": [], "new": []}
    for _ in range(rounds):
        old = await relay(OldCopier, reads)
        new = await relay(Copier, reads)
        assert old[1:] == new[1:] and new[2] is not None, "the paths relayed differently"
        times["old"].append(old[0])
        times["new"].append(new[0])
    per_chunk = {k: [t / chunks * 1e6 for t in v] for k, v in times.items()}
    ratios = [o / n for o, n in zip(times["old"], times["new"], strict=True)]
    return {
        "old_us_best": min(per_chunk["old"]), "new_us_best": min(per_chunk["new"]),
        "old_us_median": statistics.median(per_chunk["old"]),
        "new_us_median": statistics.median(per_chunk["new"]),
        "ratio_best": min(per_chunk["old"]) / min(per_chunk["new"]),
        "ratio_median": statistics.median(ratios),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    for size, label in ((0, "one event a read"), (16384, "16 KB reads")):
        found = asyncio.run(measure(args.chunks, args.rounds, size))
        print(
            f"{label:>16}: old {found['old_us_best']:.2f} µs/chunk "
            f"(median {found['old_us_median']:.2f}), new {found['new_us_best']:.2f} "
            f"(median {found['new_us_median']:.2f}); old ÷ new {found['ratio_best']:.2f}x best, "
            f"{found['ratio_median']:.2f}x median of rounds"
        )


if __name__ == "__main__":
    main()
