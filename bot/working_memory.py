"""Working memory: when a session nears its token budget, older turns are folded into
the running summary. No message is deleted; the summary just replaces them in prompts."""

from __future__ import annotations

import structlog

from bot.llm import LLM, LLMRequest, Turn
from bot.prompting import HIDDEN_STATUSES
from bot.text import estimate_tokens
from memory.learning.person_words import DATA_RULE, conversation, element
from memory.store.conversations import SqlConversationStore
from memory.store.records import StoredMessage

log = structlog.get_logger(__name__)

SUMMARY_SYSTEM = (
    "You keep the running summary of a conversation between a person and their AI "
    "companion. Update the summary with the new turns: what the person talked about, "
    "how they felt, what is unresolved, any plans or dates. Third person, at most 200 "
    "words, plain prose. The current summary is quoted between <summary> and </summary>, "
    f"the new turns as <message> elements between <conversation> and </conversation>. {DATA_RULE}"
)


def split_for_summary(
    messages: list[StoredMessage], budget_tokens: int
) -> tuple[list[StoredMessage], list[StoredMessage]] | None:
    """(older turns to fold, newer turns to keep) once the turns pass 80% of the budget."""
    visible = [m for m in messages if m.status not in HIDDEN_STATUSES]
    total = sum(estimate_tokens(m.content) + 4 for m in visible)
    if total <= 0.8 * budget_tokens or len(visible) < 4:
        return None
    kept_tokens = 0
    cut = len(visible)
    while cut > 1 and kept_tokens < 0.4 * budget_tokens:
        cut -= 1
        kept_tokens += estimate_tokens(visible[cut].content) + 4
    return visible[:cut], visible[cut:]


async def summarise_session(
    *,
    store: SqlConversationStore,
    llm: LLM,
    user_id: int,
    session_id: int,
    budget_tokens: int,
) -> bool:
    """Fold the session's older turns into its summary if it is getting long."""
    session = await store.get_session(user_id=user_id, session_id=session_id)
    if session is None:
        return False
    messages = await store.session_messages(
        user_id=user_id, session_id=session_id, after_id=session.summarized_through, limit=1000
    )
    split = split_for_summary(messages, budget_tokens)
    if split is None:
        return False
    older, _newer = split
    prompt = (
        f"Current summary:\n{element('summary', session.summary or '(none yet)')}\n\n"
        f"New turns:\n{conversation(older, zone=None, max_chars=None)}"
        "\n\nWrite the updated summary."
    )
    completion = await llm.complete(
        LLMRequest(role="fast", stable_system=SUMMARY_SYSTEM, turns=(Turn("user", prompt),))
    )
    summary = completion.text.strip()
    if not summary:
        return False
    await store.save_summary(
        user_id=user_id, session_id=session_id, summary=summary, through_id=older[-1].id
    )
    log.info("memory.session_summarised", session_id=session_id, folded=len(older))
    return True
