"""`companion import PERSON FILE` on a whole core: the person found by platform id, the
export stored and learned from with a progress bar; someone else's export without
`--as` lists the participants and keeps nothing."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from sqlalchemy import func, select

from adapters.import_cli import import_file
from bot.bootstrap import Core
from memory.store.tables import Import, Message

DATA = Path(__file__).parents[1] / "data" / "imports"


def args(person: str, file: str, self_name: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(
        person=person, file=DATA / file, self_name=self_name, background=False
    )


async def test_import_with_a_progress_bar(core: Core, capsys: pytest.CaptureFixture[str]) -> None:
    bar: list[tuple[int, int]] = []
    status = await import_file(
        core, args("telegram:111000111", "telegram_result.json"), lambda d, t: bar.append((d, t))
    )
    assert status == 0
    assert bar[-1] == (4, 4) and len(bar) == 2  # one bar step per session read
    out = capsys.readouterr().out
    assert "I found 4 messages (a Telegram export)" in out and "done" in out
    async with core.sessions() as db:
        assert await db.scalar(select(Import.status)) == "done"


async def test_someone_elses_export_needs_as(
    core: Core, capsys: pytest.CaptureFixture[str]
) -> None:
    status = await import_file(core, args("discord:1", "discord_dm.json"), lambda d, t: None)
    assert status == 1
    assert "--as NAME (one of 'Rowan', 'Kit')" in capsys.readouterr().err
    async with core.sessions() as db:
        assert await db.scalar(select(func.count(Message.id))) == 0
    status = await import_file(core, args("discord:1", "discord_dm.json", "Kit"), lambda d, t: None)
    assert status == 0
    async with core.sessions() as db:
        roles = list(await db.scalars(select(Message.role).order_by(Message.id)))
    assert roles == ["other", "user"]
