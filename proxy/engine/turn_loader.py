"""Reads a request's facts into its `Turn` before the stages run: the session state, the
workspace view, the clock and the model's window.

Neither the store nor the workspace can fail a request: a store that cannot be read yields an
empty state (and `degraded`), an unreadable workspace an empty view.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from proxy.engine.stack import Stack
from proxy.errors import StoreUnavailable
from proxy.models import context_window
from proxy.ports import StateStore, WorkspaceSource
from proxy.settings import UpstreamSettings
from proxy.types import SessionState, Turn, WorkspaceView

# Logged under the engine's name, as before loading had its own module.
log = logging.getLogger("proxy.engine.engine")


class TurnLoader:
    def __init__(
        self,
        *,
        store: StateStore,
        workspace: WorkspaceSource,
        stacks: Mapping[str, Stack],
        upstreams: Mapping[str, UpstreamSettings],
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self._workspace = workspace
        self._stacks = stacks
        self._upstreams = upstreams
        self._clock = clock

    async def load_turn(self, tenant: str, session: str, model: str) -> tuple[Turn, bool]:
        """The request's facts; `True` as second value when the store could not be read."""
        stack = self._stacks[tenant]
        upstream = self._upstreams[stack.tenant.upstream]
        degraded = False
        try:
            state = await self.store.load(tenant, session)
        except StoreUnavailable:
            state, degraded = SessionState(), True
        try:
            view = self._workspace.view(tenant, session)
        except Exception:  # a workspace problem never fails a request
            log.warning("workspace of %s unreadable", tenant)
            view = WorkspaceView()
        window = stack.tenant.model_window or context_window(model)
        turn = Turn(
            tenant=tenant,
            session=session,
            model=model,
            now=self._clock(),
            state=state,
            workspace=view,
            cache_style=upstream.cache_style,
            model_window=window,
        )
        return turn, degraded
