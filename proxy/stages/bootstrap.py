"""Bootstrap: put the workspace's identity, rules, user profile and memory into the system prompt.

The system prompt gets a static part (`<soul>`, `<agent>`, the optional tool-result notice, with
one line on the recall tool when the tenant's recall is on) and a dynamic part (`<user_profile>`,
`<memory_index>`, then the session layer's own `<soul>` and `<agent>` additions), sections
separated by a blank line, in that fixed order. The static
part depends on the managed and tenant files only, so it is byte-identical from request to request
while those files are unchanged: no timestamps, no session facts. Pure: the workspace adapter has
already read the files into `Turn.workspace`.

Layers (`WorkspaceView.files` lists them lowest first: managed, tenant; `session_files` on top):

    file              tag             managed → tenant          session layer
    soul.md           <soul>          a later layer replaces    extends (dynamic part)
    agent.md          <agent>         extends, earlier first    extends (dynamic part)
    user.md           <user_profile>  a later layer replaces    replaces
    memory/MEMORY.md  <memory_index>  extends, earlier first    extends, last

Identity and the profile are one voice each, so the most specific wins; rules and memories
accumulate. The session layer never touches the static part (that would break the provider cache
for every other session), so its soul and agent files become extra sections in the dynamic part.

Caps apply per file, after stripping surrounding whitespace: the memory index to
`memory_max_lines` lines, then every file to `max_chars_per_file` characters; each cut appends a
visible `[truncated: ...]` line. A missing or blank file adds no section and replaces nothing.
The facts compactions learned (`Turn.state.memory`, issue 19) follow the memory files in
`<memory_index>`, newest last, in the room they leave under `memory_max_lines`
(`proxy.memory.index`): like the files, they only ever change the dynamic part.
`collect` gives the sections in their fixed order (the static part: `STATIC_KEYS` of the managed and
tenant layers; the dynamic part: `DYNAMIC_KEYS` of every layer, then the session layer's own
`STATIC_KEYS` files); `cap_text` strips a file and cuts it to the caps.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from proxy.content import recall_notice
from proxy.errors import InvalidSetting
from proxy.memory.index import merge_index
from proxy.types import Draft, StageReport, SystemPrompt, Turn, WorkspaceView

TOOL_RESULT_NOTICE = (
    "Older tool results in this conversation may be shortened or removed later to save space. "
    "When a tool result holds something you will need again, write the essential part down in "
    "your reply."
)


@dataclass(frozen=True, slots=True)
class BootstrapSettings:
    """`managed_dir` is read by the shell that builds the workspace adapter, not by this stage."""

    enabled: bool = True
    max_chars_per_file: int = 2000
    memory_max_lines: int = 200
    tool_result_notice: bool = True
    managed_dir: str | None = None
    recall_tool: str = ""
    """The recall tool's name when recall is on (set by the tenant's stack, not a TOML key): the
    tool-result notice gains one line saying how cut content is recalled."""

    def __post_init__(self) -> None:
        for name in ("max_chars_per_file", "memory_max_lines"):
            if getattr(self, name) < 1:
                raise InvalidSetting(name, "must be at least 1")


def assemble_system(
    view: WorkspaceView, *, settings: BootstrapSettings, facts: tuple[str, ...] = ()
) -> tuple[str, str]:
    """The (static, dynamic) system text for `view` and the learned `facts`; ("", "") when
    there is no content."""
    found = _assemble(view, settings, facts)
    return found.static, found.dynamic


@dataclass(frozen=True, slots=True)
class _Assembly:
    static: str
    dynamic: str
    report: StageReport
    """Built once per assembly (its counters read-only): a cached assembly reports for free."""


def _assemble(
    view: WorkspaceView, settings: BootstrapSettings, facts: tuple[str, ...]
) -> _Assembly:
    found = collect(view, settings, facts)
    if not found.static and not found.dynamic:
        return _Assembly("", "", StageReport(stage="bootstrap"))
    notice = [tool_result_notice(settings)] if settings.tool_result_notice else []
    static, dynamic = "\n\n".join([*found.static, *notice]), "\n\n".join(found.dynamic)
    counters = {
        "static_chars": len(static),
        "dynamic_chars": len(dynamic),
        "sections": len(found.static) + len(found.dynamic),
        "truncations": found.cuts,
    }
    return _Assembly(static, dynamic, StageReport("bootstrap", MappingProxyType(counters)))


def tool_result_notice(settings: BootstrapSettings) -> str:
    """The notice, and the recall line after it when recall is on."""
    if not settings.recall_tool:
        return TOOL_RESULT_NOTICE
    return f"{TOOL_RESULT_NOTICE}\n{recall_notice(tool_name=settings.recall_tool)}"


_Entry = tuple[WorkspaceView, BootstrapSettings, tuple[str, ...], _Assembly]


class AssemblyCache:
    """The assemblies of the last `size` workspace views used, keyed by the view's identity.

    The workspace adapter hands out the same view object while the files are unchanged and a new
    one when they change, so a hit is always up to date. An entry keeps its view alive: its id is
    not reused by another view while it is cached. One cache per stage instance (per settings);
    a lookup with other settings, or other learned facts (the stores hand out one tuple while
    they are unchanged: compared by identity, then by value), assembles afresh. Not thread-safe
    (one event loop).
    """

    def __init__(self, *, size: int = 1024) -> None:
        if size < 1:
            raise ValueError("AssemblyCache size must be at least 1")
        self._size = size
        self._entries: dict[int, _Entry] = {}

    def assembly(
        self, view: WorkspaceView, settings: BootstrapSettings, facts: tuple[str, ...] = ()
    ) -> _Assembly:
        entry = self._entries.pop(id(view), None)
        if (
            entry is None
            or entry[0] is not view
            or entry[1] is not settings
            or (entry[2] is not facts and entry[2] != facts)
        ):
            entry = (view, settings, facts, _assemble(view, settings, facts))
        if len(self._entries) >= self._size:
            self._entries.pop(next(iter(self._entries)))  # the least recently used
        self._entries[id(view)] = entry
        return entry[3]


def run(
    draft: Draft,
    turn: Turn,
    *,
    settings: BootstrapSettings,
    cache: AssemblyCache | None = None,
) -> tuple[Draft, StageReport]:
    """Set the draft's static and dynamic system parts from `turn.workspace` and the learned
    facts (`turn.state.memory`).

    Returns the draft unchanged when disabled or when there is no content. The client's own
    system messages are kept as they are; any static/dynamic set earlier is replaced. With a
    `cache`, a workspace view (with the same facts) seen before is not assembled again.
    """
    if not settings.enabled:
        return draft, StageReport(stage="bootstrap")
    view, facts = turn.workspace, turn.state.memory
    if cache is not None:
        found = cache.assembly(view, settings, facts)
    else:
        found = _assemble(view, settings, facts)
    if not found.static and not found.dynamic:
        return draft, StageReport(stage="bootstrap")
    system = SystemPrompt(found.static, draft.system.client, found.dynamic)
    return Draft(draft.body, system, draft.messages), found.report


TAGS = MappingProxyType(
    {"soul": "soul", "user": "user_profile", "agent": "agent", "memory": "memory_index"}
)
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


def _section(
    key: str, texts: list[str], settings: BootstrapSettings, facts: tuple[str, ...] = ()
) -> tuple[str | None, int]:
    """One tagged section from the non-blank `texts` (layers, earlier first), capped per file;
    the memory index followed by the learned `facts` that fit."""
    present = [t for t in texts if t.strip()]
    if key in REPLACING:
        present = present[-1:]
    lines = settings.memory_max_lines if key == "memory" else None
    capped = [cap_text(t, max_chars=settings.max_chars_per_file, max_lines=lines) for t in present]
    body = "\n\n".join(text for text, _ in capped)
    if key == "memory" and facts:
        body = merge_index(body, facts, max_lines=settings.memory_max_lines)
    if not body:
        return None, 0
    return f"<{TAGS[key]}>\n{body}\n</{TAGS[key]}>", sum(cuts for _, cuts in capped)


def collect(
    view: WorkspaceView, settings: BootstrapSettings, facts: tuple[str, ...] = ()
) -> Sections:
    """Sections in their fixed order: static soul, agent; dynamic user, memory (the learned
    `facts` after the files), session extras."""
    session = view.session_files
    plan = [(True, key, list(view.files.get(key, ()))) for key in STATIC_KEYS]
    plan += [(False, key, [*view.files.get(key, ()), session.get(key, "")]) for key in DYNAMIC_KEYS]
    plan += [(False, key, [session.get(key, "")]) for key in STATIC_KEYS]
    static: list[str] = []
    dynamic: list[str] = []
    cuts = 0
    for is_static, key, texts in plan:
        section, n = _section(key, texts, settings, facts if not is_static else ())
        if section is not None:
            (static if is_static else dynamic).append(section)
            cuts += n
    return Sections(static=tuple(static), dynamic=tuple(dynamic), cuts=cuts)
