"""Known model context windows, looked up by the longest matching name prefix.

Sources: the providers' model pages (OpenAI: gpt-4o 128k, gpt-4.1 1,047,576, o3 / o4-mini 200k,
gpt-5 400k; Anthropic: every Claude 3/4 model 200k). A tenant's `model_window` overrides this
table; an unknown model gets `DEFAULT_WINDOW`. Smaller is the safe error: compaction comes earlier.
"""

from __future__ import annotations

from types import MappingProxyType

DEFAULT_WINDOW = 128_000

_WINDOWS = MappingProxyType(
    {
        "gpt-3.5-turbo": 16_385,
        "gpt-4": 8_192,
        "gpt-4-32k": 32_768,
        "gpt-4-turbo": 128_000,
        "gpt-4o": 128_000,
        "chatgpt-4o": 128_000,
        "gpt-4.1": 1_047_576,
        "gpt-4.5": 128_000,
        "gpt-5": 400_000,
        "o1": 200_000,
        "o1-mini": 128_000,
        "o1-preview": 128_000,
        "o3": 200_000,
        "o4-mini": 200_000,
        "claude-": 200_000,
        "deepseek-": 128_000,
    }
)


def context_window(model: str) -> int:
    """The context window in tokens of `model`, by its longest known prefix; else 128,000.

    A provider prefix such as `openai/` (gateways) is ignored; matching is case-insensitive.
    """
    name = model.strip().lower().rsplit("/", 1)[-1]
    best = ""
    for prefix in _WINDOWS:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return _WINDOWS[best] if best else DEFAULT_WINDOW
