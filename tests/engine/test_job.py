"""The compaction job a request hands the compactor (`proxy.engine.job`): its cut, the prefix body
rendered for the part summarized, and the facts its model already knows."""

from __future__ import annotations

from proxy.compaction.policy import CompactSettings
from proxy.engine.job import compaction_job, known_facts
from proxy.engine.pipeline import build_stack
from proxy.settings import TenantSettings, UpstreamSettings
from proxy.types import SessionState, WorkspaceView
from tests.factories import assistant, draft, turn, user

STACK = build_stack(
    TenantSettings(name="default", upstream="u", compact=CompactSettings(keep_recent=1)),
    UpstreamSettings(),
)
HISTORY = draft([user("one"), assistant("two"), user("three"), assistant("four"), user("five")])


def test_a_job_renders_the_body_of_the_part_it_summarizes() -> None:
    job = compaction_job(STACK, HISTORY, turn(client=HISTORY), "key")
    assert job.plan is not None and job.plan.split == 4
    assert job.prefix_body is not None and not job.use_transcript
    assert job.prefix_body["messages"][-1] == assistant("four")
    assert job.api_key == "key" and job.forced is False


def test_a_job_for_an_upstream_without_prompt_caching_has_no_prefix_body() -> None:
    job = compaction_job(STACK, HISTORY, turn(client=HISTORY, cache_style="none"), None)
    assert job.plan is not None and job.use_transcript and job.prefix_body is None


def test_a_whole_job_summarizes_every_message() -> None:
    job = compaction_job(STACK, HISTORY, turn(client=HISTORY), None, forced=True, whole=True)
    assert job.plan is not None and job.plan.split == len(HISTORY.messages) and job.forced


def test_known_facts_are_the_memory_files_lines_then_the_learned_facts() -> None:
    view = WorkspaceView(files={"memory": ("- a\n- b",)}, session_files={"memory": "- c"})
    state = SessionState(memory=("- learned",))
    assert known_facts(turn(workspace=view, state=state)) == ("- a", "- b", "- c", "- learned")
