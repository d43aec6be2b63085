"""`ctxproxy demo` as a user runs it: a subprocess, offline, no key; the output shows bootstrap,
pruning and compaction with the numbers the scripted session implies."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from proxy.demo.script import BRIEF, PLAN

ROOT = Path(__file__).resolve().parents[2]
NEXT_DAY = "The next day, a new session"


def run_demo(workdir: Path | None, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    env.update(
        HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", COLUMNS="200"
    )  # a proxy that does not exist: nothing may leave the machine
    env.update(env_extra)
    where = ["--workdir", str(workdir)] if workdir is not None else []
    return subprocess.run(
        [sys.executable, "-m", "proxy", "demo", *where],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_demo_shows_bootstrap_pruning_and_compaction(tmp_path: Path) -> None:
    done = run_demo(tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "SIMULATED upstream" in out
    assert "Hi Maya!" in out  # the name comes from user.md through bootstrap
    assert "<soul>" in out and "<user_profile>" in out
    assert len(PLAN) == len(BRIEF) == 755
    assert out.count("✂ pruned") == 1
    pruned = 200 + len('...(truncated, original: 755 chars; full text: ctx_recall(ref="call_2"))')
    assert f"✂ pruned read_file(notes/project-plan.md): 755 → {pruned} chars" in out
    assert out.count("⇣ compacted") == 1 and "⇣ compacted: 15 messages → 6" in out
    out = out.split(NEXT_DAY)[0]  # the first session
    gauges = [int(n) for n in re.findall(r"\[tokens: (\d+) / 6000\]", out)]
    assert gauges[0] == 0 and len(gauges) == 9  # 8 requests, then the final gauge
    over = next(i for i, n in enumerate(gauges) if n > 6000)
    assert out.index("over the threshold") < out.index("⇣ compacted")
    assert gauges[over - 1] <= 6000 and gauges[-1] < 6000 / 2  # compaction freed the context


def test_the_next_session_greets_with_what_the_first_ones_compaction_learned(
    tmp_path: Path,
) -> None:
    done = run_demo(tmp_path)
    assert done.returncode == 0, done.stderr
    first, later = done.stdout.split(NEXT_DAY)
    fact = "The HFA weekly sync moves to Wednesdays at 10:00 from 2026-12-09."
    assert f"By the way: {fact[0].lower()}{fact[1:]}" in first  # said in passing
    assert "remembered" not in first and "✎ memory: 1 fact(s) kept" in first
    assert f"Last time you told me: {fact[0].lower()}{fact[1:]}" in later
    assert "+ remembered (learned earlier): - " in later and fact in later
    learned = tmp_path / "workspace" / "memory" / "learned.md"
    [line] = [x for x in learned.read_text(encoding="utf-8").splitlines() if x.startswith("- ")]
    assert re.fullmatch(r"- \d{4}-\d{2}-\d{2}: " + re.escape(fact), line)
    snapshot = (tmp_path / "workspace" / "sessions" / "ctx-demo.json").read_text(encoding="utf-8")
    assert "<memory>" not in snapshot  # the facts are not part of the summary
    again = run_demo(tmp_path)  # a re-run knows it from the start, and keeps it once
    assert "+ remembered (learned earlier)" in again.stdout.split(NEXT_DAY)[0]
    assert learned.read_text(encoding="utf-8").count(fact) == 1


def test_demo_leaves_the_archive_and_the_snapshot_where_it_says(tmp_path: Path) -> None:
    done = run_demo(tmp_path)
    sessions = tmp_path / "workspace" / "sessions"
    assert str(sessions / "raw.jsonl") in done.stdout
    assert str(sessions / "ctx-demo.json") in done.stdout
    [archived] = (sessions / "raw.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(json.loads(archived)["messages"]) == 1 + 15  # system + the full history
    snapshot = json.loads((sessions / "ctx-demo.json").read_text(encoding="utf-8"))
    assert snapshot[1] == {"role": "user", "content": "Hi! Who am I talking to?"}  # the task
    assert snapshot[2]["content"].startswith("[Conversation summary]")
    assert "Maya" in snapshot[2]["content"]


def test_a_rerun_keeps_the_edited_profile_as_the_hint_says(tmp_path: Path) -> None:
    assert run_demo(tmp_path).returncode == 0
    profile = tmp_path / "workspace" / "user.md"
    assert "edit user.md and re-run" in run_demo(tmp_path).stdout
    profile.write_text("# About the user\n\n- Call him Alex.\n", encoding="utf-8")
    done = run_demo(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Hi Alex!" in done.stdout and "Maya!" not in done.stdout
    assert "kept from an earlier run, with your edits" in done.stdout
    assert profile.read_text(encoding="utf-8") == "# About the user\n\n- Call him Alex.\n"


def test_a_folder_named_workspace_in_the_workdir_is_never_deleted(tmp_path: Path) -> None:
    mine = tmp_path / "workspace" / "notes.txt"
    mine.parent.mkdir()
    mine.write_text("mine", encoding="utf-8")
    assert run_demo(tmp_path).returncode == 0
    assert mine.read_text(encoding="utf-8") == "mine"


def test_without_a_workdir_one_folder_per_user_is_used_and_no_temp_folder_is_left(
    tmp_path: Path,
) -> None:
    temp, cache = tmp_path / "tmp", tmp_path / "cache"
    temp.mkdir()
    done = run_demo(None, TMPDIR=str(temp), XDG_CACHE_HOME=str(cache))
    assert done.returncode == 0, done.stderr
    workspace = cache / "ctxproxy" / "demo" / "workspace"
    assert f"workspace: {workspace}" in done.stdout and (workspace / "user.md").is_file()
    assert list(temp.iterdir()) == []


def test_the_demo_folder_comes_from_the_environ_passed() -> None:
    from proxy.config import demo_dir

    assert demo_dir({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/ctxproxy/demo")
    assert demo_dir({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == Path("/h/.cache/ctxproxy/demo")
    assert demo_dir({"HOME": "/h"}) == Path("/h/.cache/ctxproxy/demo")
