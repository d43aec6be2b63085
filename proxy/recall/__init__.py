"""Recall: nothing the proxy cuts is out of the model's reach (issue 18).

Answers: which items of a request were cut and what their originals are, how the model names and
reads them back, and how one client answer is made of several upstream rounds when it does.

Modules, in the order a request meets them:

    refs        the ref scheme and the `ctx_recall(ref="REF")` text markers carry (stdlib only:
                the stages that write markers import it)
    index       the per-request index: client messages vs prepared ones → ref → original text
    tool        `RecallSettings`, the tool definition, whether to offer it, the next round's body
    stream      the stream merger: several upstream rounds → one client SSE stream
    held_calls  one streamed round's tool calls, held until its finish and re-indexed
    answer      one call answered: arguments, item or search, the `OutputReader` port
    search      a page of an item; the literal, case-insensitive search of everything cut
    rounds      `Round`, usage summed, non-streamed rounds combined into one answer
    messages_rounds, messages_stream   the same in the Messages API's form (tool_use blocks,
                its events), for an Anthropic upstream answering a Messages client natively
    responses_rounds, responses_stream   the same in the Responses API's form (function_call
                items, reasoning kept with its item), for a native Responses upstream
    first_user  the first user message kept before a compaction's summary

May import the foundation (`proxy.types`, `proxy.content`, `proxy.sse`, `orjson`) and its own
modules; never a stage, the engine, the server, an adapter or a network library. Async only
in `answer.answer_call`, behind the `OutputReader` port. This file imports nothing.
"""
