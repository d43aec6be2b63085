"""The scripted agent sessions `ctxproxy demo` plays: a user, a small folder of notes, and the
lines of the SIMULATED model (`proxy.demo.upstream`). Data only. In the first session the user
mentions something worth remembering ("By the way: …"), which its compaction learns; the next
session (`next_turns`) opens with it.

The two notes are 755 characters each, so pruning an old one shows `755 → 235 chars` (the first
200 characters and a marker); the call transcript the user pastes pushes the prompt over the demo's
6,000-token compaction threshold, so the next request is compacted.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from proxy.demo.upstream import Call, Say

PLAN = """\
# Project plan: HFA pipelines migration

Owner: Maya Lindqvist. Client: Harbour Freight Analytics.
Goal: move the nightly freight-volume pipeline from cron + Postgres
to Dagster + DuckDB by 2026-12-18.

Milestones
1. 2026-12-04  Port the ingest jobs (12 CSV feeds from the port API).
2. 2026-12-09  Rebuild the volume model in DuckDB; compare with Postgres.
3. 2026-12-11  Backfill 2024-2026 (about 41 GB of parquet).
4. 2026-12-16  Parallel run for 3 nights; sign-off by Tomas Eriksen.
5. 2026-12-18  Cut over; keep Postgres read-only for 30 days.

Risks
- The port API rate limit (600 req/min) slows the backfill.
- Two feeds change their schema on 2026-12-01.

Status: milestone 1 is under way.
Budget: 18 days at EUR 640/day, invoiced monthly, net 30."""

BRIEF = """\
# Client brief: Harbour Freight Analytics

Contact: Tomas Eriksen (head of data), tomas.eriksen@hfa.example
Weekly sync: Tuesdays 10:00 Lisbon time, 30 minutes.

What they want
- One trusted daily number: container moves per terminal, by 06:00.
- Dashboards stay in Metabase; no new BI tool this year.
- Data older than 3 years goes to cold storage (S3 Glacier).

Constraints
- Production access only through their bastion host (hfa-bastion-2).
- No personal data leaves the EU; the warehouse is in eu-west-1.
- Change freeze from 2026-12-20 to 2027-01-05.

Success: the 06:00 number matches finance for 5 days.

Open questions
- Who approves the Dagster Cloud spend (about USD 400 a month)?
- Can the backfill run on weekends to avoid the API rate limit?"""

LISTING = """\
notes/
  client-brief.md        755 B   2026-11-30
  project-plan.md        755 B   2026-12-01
  risks.md               2.0 KB  2026-12-01
"""

RISK_ROWS = (
    ("#", "Risk", "Likelihood", "Impact", "Owner", "Mitigation"),
    ("---",) * 6,
    ("1", "Port API rate limit (600 req/min) stretches the backfill past 2026-12-11", "high",
     "high", "Maya", "Run the backfill on weekends; ask HFA for 2,000 req/min until 2026-12-15"),
    ("2", "berth-calls and gate-moves change schema on 2026-12-01", "certain", "medium", "Maya",
     "Versioned staging tables; load both schemas side by side for 2 weeks"),
    ("3", "Change freeze 2026-12-20 to 2027-01-05", "certain", "high", "Tomas",
     "Cut-over no later than 2026-12-18; rollback plan reviewed 2026-12-15"),
    ("4", "Dagster Cloud spend (about USD 400/month) not approved in time", "medium", "medium",
     "Tomas", "Self-host Dagster on the existing VM as a fallback"),
    ("5", "Terminal T3 reports TEU instead of boxes", "certain", "low", "Ines",
     "Convert at ingest; keep the TEU figure in a side column"),
    ("6", "Metabase dashboards break if mart view names change", "low", "high", "Ines",
     "Keep view names; contract test on the marts schema"),
    ("7", "Auditors need Postgres history until end of January", "medium", "medium", "Tomas",
     "Keep Postgres read-only until 2027-01-17"),
    ("8", "Bastion host hfa-bastion-2 is a single point of access", "medium", "high", "HFA IT",
     "Ask for a second bastion before the parallel run"),
)  # fmt: skip
RISK_TABLE = "\n".join("| " + " | ".join(row) + " |" for row in RISK_ROWS)

RISKS = f"""\
# Risk register: HFA pipelines migration (updated 2026-12-01)

{RISK_TABLE}

Decisions log
- 2026-11-24: DuckDB over Snowflake (cost; data volume under 100 GB).
- 2026-11-26: Dagster over Airflow (asset-based lineage, simpler local runs).
- 2026-11-28: Backfill from parquet exports, not from the live API, where the exports exist.

Next review: 2026-12-08, with Tomas and Ines.
"""

FILES = MappingProxyType(
    {
        "notes/project-plan.md": PLAN,
        "notes/client-brief.md": BRIEF,
        "notes/risks.md": RISKS,
    }
)

CALL_LINES = (
    "Tomas: The 06:00 number was late twice last week; finance noticed.",
    "Maya: Both times the gate-moves feed arrived after 05:40. The new pipeline retries earlier.",
    "Tomas: Can we keep the Postgres tables for the auditors until the end of January?",
    "Maya: Yes, read-only for 30 days after cut-over, so until 2027-01-17.",
    "Ines: The berth-calls schema adds a vessel_imo column and renames eta to eta_utc.",
    "Maya: Noted. Staging tables are versioned, so both schemas load side by side.",
    "Tomas: Weekend backfill is fine. I will ask the port for 2,000 requests a minute.",
    "Ines: Metabase dashboards read from the marts schema; please keep the view names.",
    "Maya: The marts keep their names; only the loaders change.",
    "Tomas: Budget question: Dagster Cloud at about USD 400 a month needs Sofia's approval.",
    "Maya: I will send Sofia a one-page cost note by Friday.",
    "Ines: Terminal T3 reports moves in TEU, the others in boxes. Do we convert?",
    "Maya: We convert to boxes at ingest and keep the TEU figure in a side column.",
)


def call_transcript(max_chars: int) -> str:
    """A pasted call transcript of about `max_chars`: timestamped lines from 10:00 on."""
    lines = ["Transcript: HFA weekly sync, 2026-12-02 (auto-generated captions)", ""]
    size, minute = len(lines[0]), 0
    while size < max_chars:
        line = f"[{10 + minute // 60:02d}:{minute % 60:02d}] {CALL_LINES[minute % len(CALL_LINES)]}"
        lines.append(line)
        size, minute = size + len(line) + 1, minute + 1
    return "\n".join(lines)


SYSTEM = "You are a helpful agent with the tools list_dir and read_file."


def tools() -> list[dict[str, Any]]:
    """The two tools of the session, as the agent declares them (a fresh list each time)."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        }
        for name, description in (
            ("list_dir", "List the files of a folder."),
            ("read_file", "Read a text file."),
        )
    ]


Turn = tuple[str, tuple[Say | Call, ...]]
REMEMBER = "the HFA weekly sync moves to Wednesdays at 10:00 from 2026-12-09."
"""What the user mentions in passing in the first session, for a later one to know."""


def turns() -> tuple[Turn, ...]:
    """The user's lines, each with the steps the SIMULATED model answers it with."""
    return (
        ("Hi! Who am I talking to?", (Say("Hi {name}! I'm Wren, your assistant. What's first?"),)),
        (
            "Please list my notes folder, then read the project plan and the client brief. "
            f"By the way: {REMEMBER}",
            (
                Call("list_dir", {"path": "notes"}),
                Call("read_file", {"path": "notes/project-plan.md"}),
                Call("read_file", {"path": "notes/client-brief.md"}),
                Say(
                    "Plan: cut over to Dagster + DuckDB by 2026-12-18 (5 milestones, 18 days at"
                    " EUR 640/day). Brief: HFA wants one trusted daily number by 06:00; change"
                    " freeze from 2026-12-20."
                ),
            ),
        ),
        (
            "Here is the transcript of today's call. Check it against the risks file.\n\n"
            "{transcript}",
            (
                Call("read_file", {"path": "notes/risks.md"}),
                Say(
                    "The call covers both schema risks and the rate limit: Tomas will ask for"
                    " 2,000 requests a minute, and Postgres stays read-only until 2027-01-17."
                ),
            ),
        ),
        (
            "Thanks. Please summarise everything so far for my weekly sync.",
            (
                Say(
                    "Weekly sync summary: migration on track for 2026-12-18; milestone 1 under way;"
                    " open items: rate-limit increase (Tomas), cost note for Sofia by Friday."
                ),
            ),
        ),
    )


def next_turns() -> tuple[Turn, ...]:
    """The next session (a new session id): the model greets with what it learned (`{memory}`:
    the newest fact of the memory index the proxy put in front of it)."""
    return (
        (
            "Good morning! Anything I should keep in mind this week?",
            (Say("Good morning {name}! Last time you told me: {memory}"),),
        ),
    )
