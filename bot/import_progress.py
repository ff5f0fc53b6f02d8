"""The background side of importing: each tick extracts one window of every running
import (a gentle, steady rate; the watermarks make it resumable after a restart) and
edits the import's progress message when its percentage moved."""

from __future__ import annotations

import structlog

from bot.commands.base import CommandDeps
from bot.commands.importing import progress_reply
from bot.imports import Extracting, run_imports
from bot.outbound import Outbound
from memory.store.imports import ImportView

log = structlog.get_logger(__name__)


class ImportRunner:
    """Advances running imports and keeps their progress messages current."""

    def __init__(self, commands: CommandDeps, extracting: Extracting, outbound: Outbound) -> None:
        self._commands = commands
        self.extracting = extracting
        self._outbound = outbound

    async def tick(self) -> int:
        """One batch of every running import; how many ran."""
        return await run_imports(
            self.extracting, timezone_of=self._timezone_of, on_progress=self._show
        )

    async def _timezone_of(self, user_id: int) -> str:
        person = await self._commands.store.person(user_id)
        return person.timezone if person is not None else "UTC"

    async def _show(self, view: ImportView) -> None:
        platform, chat, message = (
            view.progress_platform,
            view.progress_chat_id,
            view.progress_message_id,
        )
        person = await self._commands.store.person(view.user_id)
        if platform is None or chat is None or message is None or person is None:
            return
        reply = await progress_reply(self._commands, person, view)
        shown = await self._outbound.edit(platform, chat, message, reply)
        log.info("import.progress", import_id=view.id, status=view.status, shown=shown)
