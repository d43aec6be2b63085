"""Section 3, tokens saved on real sessions: every trace replayed through ctxproxy and directly.

Prompt tokens are the fake upstream's chars/4 of the JSON it received (messages and tools).
Summarizer calls are counted separately (they are what compaction costs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.replay import MODELS, Replayed, replay, rig, trace_names

CONFIGS = {
    "defaults (128k)": "",
    "aggressive (20k)": "\n[tenants.default.compact]\nthreshold_tokens = 20000\n",
}


def session_row(direct: Replayed, proxied: Replayed) -> dict[str, Any]:
    chat, summaries = proxied.chat, proxied.summarizer
    return {
        "trace": direct.trace.removesuffix(".json"),
        "requests": len(direct.seen),
        "direct_tokens": sum(s.prompt_tokens for s in direct.seen),
        "proxy_tokens": sum(s.prompt_tokens for s in chat),
        "summarizer_tokens": sum(s.prompt_tokens for s in summaries),
        "direct_max": max((s.prompt_tokens for s in direct.seen), default=0),
        "proxy_max": max((s.prompt_tokens for s in chat), default=0),
        "compactions": sum(h.get("X-Ctx-Compacted") == "1" for h in proxied.headers),
        "pruned_chars_last": int(proxied.headers[-1].get("X-Ctx-Pruned-Chars", 0))
        if proxied.headers
        else 0,
        "invalid_direct": sum(bool(s.problem) for s in direct.seen),
        "invalid_proxy": sum(bool(s.problem) for s in proxied.seen),
        "problems": sorted({s.problem for s in proxied.seen if s.problem})[:3],
    }


async def run(tmp: Path, *, quick: bool) -> dict[str, Any]:
    names = trace_names()
    if quick:
        names = names[::3]
    direct: dict[str, Replayed] = {}
    async with rig(tmp, tenant_toml=None) as plain:
        for name in names:
            direct[name] = await replay(plain, name, model=MODELS["openai"])
    results: dict[str, Any] = {}
    for label, toml in CONFIGS.items():
        rows = []
        for name in names:
            async with rig(tmp / label.split()[0], tenant_toml=toml) as proxied:
                rows.append(
                    session_row(direct[name], await replay(proxied, name, model=MODELS["openai"]))
                )
        results[label] = rows
        saved = 1 - sum(r["proxy_tokens"] for r in rows) / sum(r["direct_tokens"] for r in rows)
        print(f"  savings {label}: {saved:.1%} fewer prompt tokens", flush=True)
    return {"model": MODELS["openai"], "configs": results}
