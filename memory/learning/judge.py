"""A second, small model call for the rare candidate the extraction call could not judge:
one with no verdict that is close to a live memory the model was not shown (the prompt
shows at most a bounded number of memories). The model sees each such candidate with
those memories and says same, update or new; nothing is decided by similarity alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.learning.extraction_prompt import MAX_MESSAGE_CHARS, ToolSchema, remembered
from memory.learning.reconcile import Plan
from memory.person_words import DATA_RULE, block, element
from memory.store.items import MemoryItem
from memory.store.memory_batch import Embedding, MemoryBatch
from memory.store.ports import ToolCaller

log = structlog.get_logger(__name__)

NEAR = 0.80  # cosine from which an unshown memory may be the same fact or its old value
MAX_NEAR = 3

JUDGE_TOOL = ToolSchema(
    name="judge_memories",
    description="Say how each new statement relates to the remembered memories shown with it.",
    input_schema={
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "statement": {"type": "integer"},
                        "verdict": {"enum": ["same", "update", "new"]},
                        "memory": {"type": ["string", "null"]},
                    },
                    "required": ["statement", "verdict"],
                },
            }
        },
        "required": ["verdicts"],
    },
)

JUDGE_SYSTEM = f"""\
You keep the long-term memory of a companion about one person. Each numbered statement \
below was just learned about the person; under it are remembered memories (with labels \
like m12) that it was not yet compared with. Call judge_memories once, with one verdict \
per statement: "same" when a shown memory already says the same thing about the same \
subject (give its label), "update" when the statement changes, negates or ends a shown \
memory (no longer, used to, moved, quit, a new value for the same attribute of the same \
subject; give its label), "new" otherwise. A fact about someone else (a sister, a \
friend) is never the same as, nor an update of, a fact about the person. Each \
statement is a <statement> element with its number, followed by its <remembered> \
memories, all between <statements> and </statements>. {DATA_RULE}"""


class _Verdict(BaseModel):
    model_config = ConfigDict(extra="ignore")

    statement: int
    verdict: Literal["same", "update", "new"]
    memory: str | None = None


async def judge_unseen(
    llm: ToolCaller,
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    now: datetime,
    plans: Sequence[Plan],
    vectors: dict[str, Embedding],
    shown: set[int],
) -> list[Plan]:
    """`plans` with the model's verdict on every candidate that had none but is close to
    a live memory the extraction call did not show; one call for all of them, none when
    there are none. A failing call raises (the run is retried later)."""
    unseen = await _unseen(sessions, user_id, now, plans, vectors, shown)
    if not unseen:
        return list(plans)
    raw = await llm.call_tool(
        system=JUDGE_SYSTEM,
        prompt=judge_prompt(plans, unseen),
        tool_name=JUDGE_TOOL.name,
        tool_description=JUDGE_TOOL.description,
        input_schema=JUDGE_TOOL.input_schema,
    )
    judged = list(plans)
    for verdict in _verdicts(raw):
        near = unseen.get(verdict.statement - 1, [])
        label = (verdict.memory or "").strip().lower()
        if verdict.verdict == "new" or label not in {item.label for item in near}:
            continue
        plan = judged[verdict.statement - 1]
        judged[verdict.statement - 1] = (
            replace(plan, same_as=label)
            if verdict.verdict == "same"
            else replace(plan, supersedes=label)
        )
    log.info("memory.judged", user_id=user_id, asked=len(unseen))
    return judged


async def _unseen(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    now: datetime,
    plans: Sequence[Plan],
    vectors: dict[str, Embedding],
    shown: set[int],
) -> dict[int, list[MemoryItem]]:
    """Per plan index (only plans without a verdict): close live memories not shown."""
    unseen: dict[int, list[MemoryItem]] = {}
    async with sessions() as db:
        batch = MemoryBatch(db, user_id=user_id, now=now)
        for index, plan in enumerate(plans):
            if plan.same_as or plan.supersedes:
                continue
            close = await batch.similar(
                vectors[plan.candidate.content], limit=MAX_NEAR, min_similarity=NEAR
            )
            near = [item for item, _ in close if item.id not in shown]
            if near:
                unseen[index] = near
    return unseen


def judge_prompt(plans: Sequence[Plan], unseen: dict[int, list[MemoryItem]]) -> str:
    """The numbered statements, each with the memories to compare it with, as escaped
    data."""
    blocks = []
    for index, near in sorted(unseen.items()):
        statement = plans[index].candidate.content[:MAX_MESSAGE_CHARS]
        blocks.append(element("statement", statement, {"number": index + 1}))
        blocks.append(remembered(near))
    return block("statements", blocks)


def _verdicts(raw: Any) -> list[_Verdict]:
    """The usable verdicts (an unusable one leaves its candidate new)."""
    items = raw.get("verdicts") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise ValueError("judge_memories answer has no verdicts list")
    found = []
    for item in items:
        try:
            found.append(_Verdict.model_validate(item))
        except ValidationError:
            log.info("memory.verdict_invalid")
    return found
