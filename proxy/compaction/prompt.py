"""The summarizer's request and the reading of its answer (DESIGN §3 Compaction). Pure.

Two requests: one that reuses the conversation's own prefix, so a provider's prompt cache serves
it, and a plain transcript for upstreams without prompt caching. With `memory`, the instruction
also asks for durable facts in a `<memory>` block (`proxy.memory.block`), in the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from proxy.compaction.plan import flatten_to_text
from proxy.compaction.policy import OUTPUT_RESERVE_TOKENS, CompactSettings
from proxy.memory.block import MEMORY_INSTRUCTION, without_memory
from proxy.types import JSON, Message

_BODY_KEYS = ("model", "messages", "tools", "prompt_cache_key", "user")
_REASONING_MODELS = ("o1", "o3", "o4", "gpt-5")
MEMORY_OUTPUT_TOKENS = 1_024
"""Room for the `<memory>` block's facts in the summarizer's answer."""


def summary_instruction(*, max_words: int, memory: bool = False) -> str:
    """What the summarizer is asked; with `memory`, for the `<memory>` block too."""
    text = (
        "Summarize the conversation above so that the summary can replace it: it is all that "
        "will remain of it. Keep every key fact: names, numbers, identifiers, decisions and their "
        "reasons, file paths, commands, errors and how they were resolved; the user's stated "
        "preferences and constraints; open tasks and the next step. If the conversation begins "
        "with an earlier [Conversation summary], fold its facts in. Drop greetings, repeated "
        "confirmations and intermediate reasoning. Do not call any tool. First write your "
        "analysis inside <analysis></analysis>, then the summary inside <summary></summary>, "
        f"at most {max_words} words, in the language of the conversation."
    )
    return f"{text} {MEMORY_INSTRUCTION}" if memory else text


def build_summary_body(
    prefix_body: JSON, *, settings: CompactSettings, model: str, memory: bool = False
) -> JSON:
    """A non-streaming summarizer request that reuses the conversation's own prefix (system,
    tools, messages as they would be sent upstream, so a provider cache serves it) followed by
    one user instruction. Keys that shape the answer (stream, response_format…) are dropped."""
    body = {k: prefix_body[k] for k in _BODY_KEYS if k in prefix_body}
    body["model"] = settings.summarizer_model or model
    instruction = summary_instruction(max_words=settings.max_summary_words, memory=memory)
    body["messages"] = [*prefix_body.get("messages", ()), {"role": "user", "content": instruction}]
    if body.get("tools"):
        body["tool_choice"] = "none"
    return {**body, **_output_limit(settings, body["model"], memory=memory), "stream": False}


def build_transcript_body(
    messages: Sequence[Message], *, settings: CompactSettings, model: str, memory: bool = False
) -> JSON:
    """The fallback for upstreams without prompt caching: the messages as one plain transcript."""
    transcript = "\n\n".join(_render(m) for m in messages)
    instruction = summary_instruction(max_words=settings.max_summary_words, memory=memory)
    chosen = settings.summarizer_model or model
    return {
        "model": chosen,
        "messages": [
            {"role": "system", "content": "You summarize conversations faithfully and briefly."},
            {"role": "user", "content": f"<conversation>\n{transcript}\n</conversation>"},
            {"role": "user", "content": instruction.replace("above", "in <conversation>", 1)},
        ],
        **_output_limit(settings, chosen, memory=memory),
        "stream": False,
    }


def _output_limit(settings: CompactSettings, model: str, *, memory: bool) -> dict[str, int]:
    """Room for the analysis and the summary (~2 tokens per word each) and the facts, plus
    reasoning tokens for reasoning models, which only accept `max_completion_tokens`."""
    visible = 4 * settings.max_summary_words + 1_024 + (MEMORY_OUTPUT_TOKENS if memory else 0)
    if model.lower().rsplit("/", 1)[-1].startswith(_REASONING_MODELS):
        return {"max_completion_tokens": min(visible + 8_192, OUTPUT_RESERVE_TOKENS)}
    return {"max_tokens": min(visible, OUTPUT_RESERVE_TOKENS)}


def _render(message: Message) -> str:
    role = str(message.get("role", "?"))
    lines = [f"[{role}]", flatten_to_text(message.get("content"))]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        lines.append(f"(calls {function.get('name')}({function.get('arguments', '')}))")
    return "\n".join(line for line in lines if line)


_SUMMARY_RE = re.compile(r"<summary>(.*?)(?:</summary>|\Z)", re.DOTALL | re.IGNORECASE)
_ANALYSIS_RE = re.compile(r"<analysis>.*?(?:</analysis>|\Z)", re.DOTALL | re.IGNORECASE)
_CLOSE_RE = re.compile(r"</summary>", re.IGNORECASE)


def extract_summary(text: str) -> str:
    """The content of the last `<summary>` (an unclosed one runs to the end); without the tag,
    the text with any `<analysis>` block removed. A `<memory>` block is never part of it. Empty
    when the model said nothing usable."""
    text = without_memory(text)
    found = _SUMMARY_RE.findall(text)
    if found:
        return str(found[-1]).strip()
    return _CLOSE_RE.sub("", _ANALYSIS_RE.sub("", text)).strip()
