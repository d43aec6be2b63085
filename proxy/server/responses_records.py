"""What the Responses routes keep in the store and read back (`proxy.ports.ResponseStore`).

    previous responses   each response served (its expanded input and its output), by id, so
                         that a request naming it as `previous_response_id` is expanded to the
                         whole conversation before the pipeline runs (`expanded`); not kept for
                         a request sent with `store: false`, as the API keeps none then
    summaries            what a compaction item's handle points to: the messages standing for
                         the conversation it covers and that conversation's prefix hash
                         (`keep_summary` signs the handle, `summaries` opens every handle of a
                         request, or refuses with the reason)
    the secret           `[server] secret_env`, else one generated once and kept in the store
                         (`HandleSecret`, shared by every replica)

A store that cannot be read is a 503 where the request cannot go on without it (an id that only
the store knows, a handle to open or to sign); a record that cannot be written is lost, and
logged.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from proxy.errors import BadRequest, CtxProxyError, StoreUnavailable
from proxy.identity import safe_id
from proxy.inbound.compaction_handle import Refusal, open_handle, sign_handle
from proxy.inbound.responses_compaction import handles_in
from proxy.inbound.responses_errors import compaction_refused, previous_response_not_found
from proxy.inbound.responses_previous import (
    expand_previous,
    record_from_json,
    record_json,
    stored_response,
)
from proxy.ports import ResponseStore
from proxy.types import JSON, Message

log = logging.getLogger(__name__)

SECRET_BYTES = 32


class StoreDown(CtxProxyError):
    """503: the request needs something only the store holds, and the store is down."""

    status = 503
    code = "store_unavailable"


def refusal(answer: tuple[int, JSON]) -> BadRequest:
    """The 400 of an `proxy.inbound.responses_errors` answer, to raise."""
    error = answer[1]["error"]
    return BadRequest(error["message"], param=error.get("param"), code=error.get("code"))


class HandleSecret:
    """The compaction handles' secret, read once: the configured one, else the store's."""

    def __init__(self, configured: str | None) -> None:
        self._secret = configured.encode() if configured else None

    async def get(self, store: ResponseStore) -> bytes:
        if self._secret is None:
            try:
                self._secret = await store.handle_secret(secrets.token_bytes(SECRET_BYTES))
            except StoreUnavailable as exc:
                raise StoreDown(
                    "The compaction handles' secret is kept in the store, which cannot be "
                    "reached; set [server] secret_env to sign handles without it."
                ) from exc
        return self._secret


class Records:
    """One tenant's records, for one request."""

    def __init__(
        self,
        store: ResponseStore,
        secret: HandleSecret,
        tenant: str,
        *,
        ttl_s: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._secret = secret
        self._tenant = tenant
        self._ttl_s = ttl_s
        self._clock = clock

    async def expanded(self, body: JSON, *, pass_unknown: bool) -> JSON:
        """`body` with its `previous_response_id` expanded from the store; an id the store
        does not know stays in the body when `pass_unknown` (a Responses upstream may know it),
        else it is a 400 saying so."""
        previous = body.get("previous_response_id")
        if not isinstance(previous, str) or not previous:
            return body
        try:
            raw = await self._store.get_record(self._tenant, "response", safe_id(previous))
        except StoreUnavailable as exc:
            if pass_unknown:
                return body
            raise StoreDown("previous_response_id cannot be read: the store is down.") from exc
        record = record_from_json(_loads(raw)) if raw is not None else None
        if record is not None:
            return expand_previous(body, record)
        if pass_unknown:
            return body
        raise refusal(previous_response_not_found(previous))

    async def keep_response(self, request: Mapping[str, Any], response: JSON) -> None:
        """Keep `response`, the answer to the (expanded) `request`; nothing when the client sent
        `store: false` or the store is down."""
        if request.get("store") is False or not isinstance(response.get("id"), str):
            return
        record = record_json(stored_response(request, response))
        try:
            await self._store.put_record(
                self._tenant, "response", safe_id(record["id"]), orjson.dumps(record)
            )
        except StoreUnavailable:
            log.warning("response %s not kept: the store is down", record["id"])

    async def summaries(self, body: Mapping[str, Any]) -> dict[str, Sequence[Message]]:
        """The messages each ctxproxy compaction item of `body` stands for, by handle; a 400
        naming the item and the reason for the first one refused (never expanded)."""
        found: dict[str, Sequence[Message]] = {}
        handles = handles_in(body)
        if not handles:
            return found
        secret = await self._secret.get(self._store)
        for index, token in handles:
            opened = open_handle(token, secret=secret, tenant=self._tenant, now=self._clock())
            if isinstance(opened, Refusal):
                raise refusal(compaction_refused(index, opened.reason))
            try:
                raw = await self._store.get_record(self._tenant, "summary", opened.summary_id)
            except StoreUnavailable as exc:
                raise StoreDown("A compaction item's summary cannot be read now.") from exc
            kept = _loads(raw) if raw is not None else None
            if not isinstance(kept, dict) or kept.get("prefix") != opened.prefix_hash:
                reason = "compaction handle's summary is no longer kept (expired)"
                raise refusal(compaction_refused(index, reason))
            found[token] = list(kept["messages"])
        return found

    async def keep_summary(self, messages: Sequence[Message], *, prefix_hash: str) -> str:
        """Keep the messages standing for a conversation (its `prefix_hash`) and return the
        signed handle pointing to them, valid for the session TTL."""
        secret = await self._secret.get(self._store)
        summary_id = secrets.token_urlsafe(18)
        expires_at = self._clock() + self._ttl_s
        kept = orjson.dumps({"prefix": prefix_hash, "messages": list(messages)})
        try:
            await self._store.put_record(self._tenant, "summary", summary_id, kept)
        except StoreUnavailable as exc:
            raise StoreDown("The compaction's summary cannot be kept: the store is down.") from exc
        return sign_handle(
            secret=secret,
            tenant=self._tenant,
            prefix_hash=prefix_hash,
            summary_id=summary_id,
            expires_at=expires_at,
        )


def _loads(raw: bytes) -> Any:
    """A stored record as JSON; None for one that is not (it is then unknown)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
