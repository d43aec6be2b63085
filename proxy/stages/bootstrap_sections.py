"""The bootstrap stage's tagged sections from a workspace view, capped per file. Pure.

`collect` gives the sections of `proxy.stages.bootstrap` (see its docstring for the layers and
caps) in their fixed order, split into the static part (`STATIC_KEYS` of the managed and tenant
layers) and the dynamic part (`DYNAMIC_KEYS` of every layer, then the session layer's own
`STATIC_KEYS` files), with the number of cuts made. A key in `REPLACING` keeps only its last
non-blank layer; the others join theirs, earlier first. `cap_text` strips a file and cuts it to the
caps, one visible marker line per cut. A missing or blank file adds no section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy.types import WorkspaceView

if TYPE_CHECKING:  # only a type here: proxy.stages.bootstrap imports this module
    from proxy.stages.bootstrap import BootstrapSettings

TAGS = {"soul": "soul", "user": "user_profile", "agent": "agent", "memory": "memory_index"}
REPLACING = frozenset({"soul", "user"})
STATIC_KEYS = ("soul", "agent")
DYNAMIC_KEYS = ("user", "memory")


def cap_text(text: str, *, max_chars: int, max_lines: int | None = None) -> tuple[str, int]:
    """`text` stripped and cut to `max_lines` lines, then to `max_chars` characters.

    Each cut appends one marker line; returns the text and the number of cuts (0: unchanged).
    """
    body = text.strip()
    markers: list[str] = []
    if max_lines is not None:
        lines = body.splitlines()
        if len(lines) > max_lines:
            body = "\n".join(lines[:max_lines])
            markers.append(f"[truncated: first {max_lines} of {len(lines)} lines shown]")
    if len(body) > max_chars:
        markers.append(f"[truncated: first {max_chars} of {len(body)} characters shown]")
        body = body[:max_chars]
    return "\n".join([body, *markers]), len(markers)


@dataclass(frozen=True, slots=True)
class Sections:
    static: tuple[str, ...]
    dynamic: tuple[str, ...]
    cuts: int


def _section(key: str, texts: list[str], settings: BootstrapSettings) -> tuple[str | None, int]:
    """One tagged section from the non-blank `texts` (layers, earlier first), capped per file."""
    present = [t for t in texts if t.strip()]
    if key in REPLACING:
        present = present[-1:]
    lines = settings.memory_max_lines if key == "memory" else None
    capped = [cap_text(t, max_chars=settings.max_chars_per_file, max_lines=lines) for t in present]
    if not capped:
        return None, 0
    body = "\n\n".join(text for text, _ in capped)
    return f"<{TAGS[key]}>\n{body}\n</{TAGS[key]}>", sum(cuts for _, cuts in capped)


def collect(view: WorkspaceView, settings: BootstrapSettings) -> Sections:
    """Sections in their fixed order: static soul, agent; dynamic user, memory, session extras."""
    session = view.session_files
    plan = [(True, key, list(view.files.get(key, ()))) for key in STATIC_KEYS]
    plan += [(False, key, [*view.files.get(key, ()), session.get(key, "")]) for key in DYNAMIC_KEYS]
    plan += [(False, key, [session.get(key, "")]) for key in STATIC_KEYS]
    static: list[str] = []
    dynamic: list[str] = []
    cuts = 0
    for is_static, key, texts in plan:
        section, n = _section(key, texts, settings)
        if section is not None:
            (static if is_static else dynamic).append(section)
            cuts += n
    return Sections(static=tuple(static), dynamic=tuple(dynamic), cuts=cuts)
