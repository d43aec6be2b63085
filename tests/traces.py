"""Where the recorded agent sessions are: `$CTXPROXY_TRACES`, else `../shared/traces` beside the
checkout (the team's layout). Tests that replay them skip, saying so, when neither exists."""

from __future__ import annotations

import os
from pathlib import Path


def trace_dir() -> Path:
    configured = os.environ.get("CTXPROXY_TRACES")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "shared" / "traces"


TRACE_DIR = trace_dir()
TRACE_FILES = sorted(TRACE_DIR.glob("*.json"))
