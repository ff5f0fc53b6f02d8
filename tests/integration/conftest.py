"""Fixtures for driving the core on real PostgreSQL with a scripted model."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.background import BackgroundTasks
from bot.commands.router import Router
from bot.conversation import Conversation, ConversationConfig
from bot.domain import IncomingMessage
from bot.prompting import load_persona
from memory.store.conversations import SqlConversationStore
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM


@pytest.fixture
def llm() -> ScriptedLLM:
    """A scripted model."""
    return ScriptedLLM()


@pytest.fixture
def conversation(
    db: async_sessionmaker[AsyncSession], llm: ScriptedLLM, clock: FakeClock
) -> Conversation:
    """The conversation use case over real PostgreSQL, without memory."""
    return Conversation(
        store=SqlConversationStore(db),
        llm=llm,
        clock=clock,
        persona=load_persona(),
        config=ConversationConfig(),
        background=BackgroundTasks(),
    )


@pytest.fixture
def router(conversation: Conversation) -> Router:
    """The router over that conversation."""
    return Router(conversation)


def says(text: str, *, user: str = "alice", message_id: str | None = None) -> IncomingMessage:
    """A private console message from `user`."""
    return IncomingMessage(
        platform="console",
        platform_user_id=user,
        chat_id=f"chat-{user}",
        display_name=user.title(),
        text=text,
        platform_message_id=message_id,
    )
