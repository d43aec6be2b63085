"""The context pipeline: an ordered list of pure stages, built once from settings.

A request flows: `draft_from_body` → stages before compaction (stored summary, budgets, pruning)
→ compaction (async, in `proxy.compaction.compactor`) → stages after (bootstrap) → `render`
(cache layout, to an OpenAI-format body) → `validate` (pre-flight). A stage that raises is skipped
and reported (fail-open): the user's request never fails because a context stage did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from proxy.content import SYSTEM_ROLES
from proxy.types import JSON, Draft, Message, StageReport, SystemPrompt, Turn

log = logging.getLogger(__name__)

Stage = Callable[[Draft, Turn], tuple[Draft, StageReport]]
"""A pure transform of the draft; `functools.partial(module.run, settings=...)` in practice."""


def draft_from_body(body: JSON) -> Draft:
    """Split the client's leading system/developer messages from the history. Copies nothing."""
    messages: list[Message] = body["messages"]
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in SYSTEM_ROLES:
        lead += 1
    rest = dict(body)
    del rest["messages"]
    return Draft(rest, SystemPrompt("", tuple(messages[:lead])), tuple(messages[lead:]))


def run_stages(
    stages: Sequence[tuple[str, Stage]], draft: Draft, turn: Turn
) -> tuple[Draft, list[StageReport]]:
    """Run each stage in order; a stage that raises is skipped and reported, never fatal."""
    reports: list[StageReport] = []
    for name, stage in stages:
        try:
            draft, report = stage(draft, turn)
        except Exception as exc:  # fail-open by contract (DESIGN §Standards)
            log.warning("stage %s skipped: %s", name, type(exc).__name__)
            report = StageReport(stage=name, skipped=type(exc).__name__)
        reports.append(report)
    return draft, reports
