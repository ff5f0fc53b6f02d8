"""`/edit` and the Edit button in the terminal: the real `companion chat` process, the
real anthropic SDK against a loopback Messages API, and the real test PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.tables import Memory
from tests.e2e.test_console import KEY, _companion, _env
from tests.fakes.anthropic_api import FakeAnthropicAPI


async def test_edit_by_command_and_by_button_in_the_terminal(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(api_key=KEY) as fake:
        fake.queue_tool_use("classify_memory", {"category": "fact", "importance": 6})
        lines = [
            "/remember I work at Acme",
            "/edit m1 I work at Globex",
            "/edit m7 I work at Initech",  # no such memory
            "/memory",
            "3",  # ✏️ Edit, the third button under /memory
            "1",  # ✏️ m2, the first (and only) memory it offers
            "I work at Initech",  # the new text, not conversation
            "/memory",
        ]
        code, out, err = await _companion(
            "chat",
            stdin="\n".join(lines) + "\n",
            env=_env(fake, database_url, tmp_path),
            cwd=tmp_path,
        )
        chats = [r for r in fake.requests if not r.get("tool_choice")]
    assert code == 0, err
    assert "Updated: “I work at Globex” (now m2; it said “I work at Acme”" in out
    assert "  [1] ↩ Undo" in out
    assert "I have no memory m7." in out
    assert "  [1] 🗑 m2\n  [2] 📌 m2\n  [3] ✏️ Edit" in out
    assert "Which one should I change?\nm2 · I work at Globex\n  [1] ✏️ m2" in out
    assert "What should m2 say instead of “I work at Globex”?" in out
    assert "Updated: “I work at Initech” (now m3" in out
    assert "m3 · I work at Initech" in out
    assert chats == []  # nothing of it was answered as conversation
    async with db() as s:
        versions = (
            await s.execute(select(Memory.content, Memory.source).order_by(Memory.id))
        ).all()
    assert [tuple(v) for v in versions] == [
        ("I work at Acme", "user"),
        ("I work at Globex", "user"),
        ("I work at Initech", "user"),
    ]
