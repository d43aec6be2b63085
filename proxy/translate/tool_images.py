"""Images a tool returned → a chat request that shows them to the model (pure).

A chat-completions `tool` message holds text only, but the Messages API's `tool_result` and the
Responses API's `function_call_output` may hold images (a screenshot tool, a chart). For a chat
upstream `move_tool_images` keeps each such tool message's text, adds a note that its images
follow, and puts the images in the `user` message right after the run of tool messages they
belong to, each tool call's images after a short text naming the call:

    tool  t1  "listing…\\n[1 image: in the user message after the tool results]"
    tool  t2  "done"
    user      [text "[image from tool call t1]", image_url …, <the user's own content>]

The user message is a new one, or the one that follows the run (its content after the images:
some chat templates refuse two user messages in a row).

Nothing is moved when no tool message has images (the messages come back as they were).

For an Anthropic upstream, whose `tool_result` holds images, `keep_tool_images` instead puts each
tool message's images after its text, as `image_url` parts of the tool message itself, which the
Messages translation (`proxy.translate.anthropic_blocks`) turns into image blocks of its
`tool_result`: no note, no user message added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.types import JSON, Message


def move_tool_images(
    messages: Sequence[Message], images: Mapping[int, Sequence[JSON]]
) -> list[Message]:
    """`messages` with the image parts `images[i]` of tool message `i` moved as the module doc
    says; `images` entries that are empty or name no tool message are ignored. Input not
    mutated."""
    out: list[Message] = []
    waiting: list[Any] = []  # the user message's parts, for the current run of tool messages
    for index, message in enumerate(messages):
        if waiting and message.get("role") != "tool":
            out.append(_user_message(waiting, message if message.get("role") == "user" else None))
            waiting = []
            if message.get("role") == "user":
                continue
        found = list(images.get(index, ()))
        if not found or message.get("role") != "tool":
            out.append(message)
            continue
        out.append(_with_note(message, len(found)))
        waiting += [{"type": "text", "text": _heading(message, len(found))}, *found]
    if waiting:
        out.append({"role": "user", "content": waiting})
    return out


def _user_message(images: list[Any], following: Message | None) -> Message:
    """The user message showing `images`: a new one, or `following` with them first."""
    if following is None:
        return {"role": "user", "content": images}
    content = following.get("content")
    if isinstance(content, str):
        own: list[Any] = [{"type": "text", "text": content}] if content else []
    else:
        own = list(content) if isinstance(content, list) else []
    return {**following, "content": [*images, *own]}


def _count(n: int) -> str:
    return "1 image" if n == 1 else f"{n} images"


def _heading(message: Message, n: int) -> str:
    noun = "image" if n == 1 else f"{n} images"
    return f"[{noun} from tool call {message.get('tool_call_id', '')}]"


def _with_note(message: Message, n: int) -> Message:
    """The tool message with a note after its text that its images follow."""
    note = f"[{_count(n)}: in the user message after the tool results]"
    content = message.get("content")
    out = dict(message)
    if isinstance(content, list):
        out["content"] = [*content, {"type": "text", "text": note}]
    elif isinstance(content, str) and content:
        out["content"] = f"{content}\n{note}"
    else:
        out["content"] = note
    return out


def keep_tool_images(
    messages: Sequence[Message], images: Mapping[int, Sequence[JSON]]
) -> list[Message]:
    """`messages` with the image parts `images[i]` after the text of tool message `i`, in its
    own content (module doc); entries that are empty or name no tool message are ignored.
    Input not mutated."""
    out: list[Message] = []
    for index, message in enumerate(messages):
        found = list(images.get(index, ()))
        if not found or message.get("role") != "tool":
            out.append(message)
            continue
        content = message.get("content")
        if isinstance(content, str):
            own: list[Any] = [{"type": "text", "text": content}] if content else []
        else:
            own = list(content) if isinstance(content, list) else []
        out.append({**message, "content": [*own, *found]})
    return out
