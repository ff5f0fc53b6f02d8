"""Deciding in code what a candidate memory is: invalid, already known, a new version of a
known memory, or new; then storing it with provenance inside the caller's batch.

Before the model: only exact duplicates (by hash) and what the person asked to forget are
dropped. Past that, the model's verdict decides (`same_as` a shown memory: mentioned
again; `supersedes` one: a new version, history kept; neither: new); similarity alone
never drops a candidate. A supersede by a fact naming someone else (a sister, a friend)
than the memory it would replace is refused in code and stored as new. With no verdict,
a candidate that ends or negates a fact ("no longer", "used to", "quit", "moved") replaces
the nearest live memory of its category or subject that does not, when the two say the
same thing once the cue words are set aside (and are about the same people). Extracted
memories never replace what the person set explicitly or pinned: the person is asked.

A known memory said again is affirmed (`memory.learning.affirmation`). A candidate the
model is unsure of (confidence at least the floor, below `MIN_CONFIDENCE`) is kept only
as a new memory marked unsure (recall-only until the person confirms it): it never
affirms, replaces or asks about what is known.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from zoneinfo import ZoneInfo

import structlog

from memory.learning.affirmation import affirm
from memory.learning.endings import has_ending, overlap
from memory.learning.extraction_prompt import ExtractedMemory, ExtractionAnswer
from memory.learning.lifespan import lifespan, parse_event_date
from memory.learning.questions import ask_update
from memory.learning.system_claims import claims_power_over_system
from memory.recall.relevant import kin_terms, names, owner_kin
from memory.store.errors import MemoryNotFound
from memory.store.items import (
    Candidate,
    ExtractionOutcome,
    MemoryItem,
    UpdateQuestion,
    content_hash,
)
from memory.store.memory_batch import Embedding, MemoryBatch, to_item
from memory.store.records import StoredMessage
from memory.store.threads import THREADED_CATEGORIES, attach, file_under, thread_title, touch

log = structlog.get_logger(__name__)

MIN_CONFIDENCE = 0.7  # below this (down to the floor) a candidate is kept as unsure
CONFIDENCE_FLOOR = 0.4  # below this a candidate is dropped
MAX_CONTENT_CHARS = 500
MIN_CONTENT_CHARS = 12
MIN_CONTENT_WORDS = 3
DUPLICATE_SIMILARITY = 0.92  # a forgotten memory said again: not learned again
SUPERSEDES_MATCH = 0.80  # how close a verdict given as text must be to a memory
KEPT = ("active", "dying", "forgotten")
ENDED_NEAR = 0.5  # how close a memory must be to be considered as the one a cue ends
ENDED_OVERLAP = 0.6  # content words shared once the cue words are set aside
ENDED_SIMILARITY = 0.80
SUBJECT_WORDS = 5  # "The person's best friend Tom …": whom a fact is about comes first
_GENERIC_WORDS = (
    "the person they them their is are was has have had a an it this that of to and "
    "said says something things stuff likes feels thinks about some"
)
_GENERIC = frozenset(_GENERIC_WORDS.split())  # a memory of only these words says nothing
_LABEL = re.compile(r"m(\d+)")


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated candidate, the model's verdict on it (the label, or text, of the
    remembered memory it repeats or replaces), and the title of the ongoing situation it
    belongs to (threads, goals and events)."""

    candidate: Candidate
    supersedes: str | None = None
    thread: str | None = None
    same_as: str | None = None


def plans_from(
    answer: ExtractionAnswer,
    shown: Sequence[StoredMessage],
    zone: ZoneInfo,
    now: datetime,
    min_importance: float,
    min_confidence: float = CONFIDENCE_FLOOR,
) -> tuple[list[Plan], int]:
    """Validated candidates with tier and expiry decided, and how many were dropped;
    those with confidence in [`min_confidence`, `MIN_CONFIDENCE`) are marked unsure."""
    user_ids = {m.id for m in shown if m.role == "user"}
    plans: list[Plan] = []
    for extracted in answer.memories:
        evidence = tuple(sorted(set(extracted.evidence_message_ids) & user_ids))
        reason = rejection(extracted, evidence, min_importance, min_confidence)
        if reason is not None:
            log.debug("memory.candidate_dropped", reason=reason)
            continue
        event_at = parse_event_date(extracted.event_date, zone) if extracted.event_date else None
        span = lifespan(extracted.category, event_at=event_at, now=now, hint=extracted.expiry_hint)
        candidate = Candidate(
            content=extracted.content,
            category=span.category,
            tier=span.tier,
            importance=extracted.importance,
            confidence=extracted.confidence,
            event_at=span.event_at,
            expires_at=span.expires_at,
            source_message_ids=evidence,
            unsure=extracted.confidence < MIN_CONFIDENCE,
        )
        title = extracted.thread
        if title is not None and claims_power_over_system(title):
            title = None
        plans.append(
            Plan(candidate, extracted.supersedes or None, title, extracted.same_as or None)
        )
    return plans, len(answer.memories) - len(plans)


def rejection(
    extracted: ExtractedMemory,
    evidence: Sequence[int],
    min_importance: float,
    min_confidence: float = CONFIDENCE_FLOOR,
) -> str | None:
    """Why a candidate cannot be stored (None when it can): evidence, thresholds, shape."""
    words = re.findall(r"\w+", extracted.content.casefold())
    if not evidence:
        return "evidence"
    if claims_power_over_system(extracted.content):
        return "system_claim"
    if extracted.confidence < min(min_confidence, MIN_CONFIDENCE):
        return "confidence"
    if extracted.importance < min_importance:
        return "importance"
    if len(extracted.content) > MAX_CONTENT_CHARS:
        return "too_long"
    if len(extracted.content) < MIN_CONTENT_CHARS or len(words) < MIN_CONTENT_WORDS:
        return "too_short"
    if all(word in _GENERIC for word in words):
        return "vague"
    return None


async def store_plans(
    batch: MemoryBatch, plans: Sequence[Plan], vectors: dict[str, Embedding], *, session_id: int
) -> ExtractionOutcome:
    """Reconcile and store every plan in `batch`; `vectors` maps each text to its embedding.

    Threads, goals and events are filed under the person's thread for their situation,
    which records `session_id` as one more session it came up in. A change to an
    explicit or pinned memory is stored as a question to the person instead.
    """
    added, updated, skipped = 0, 0, 0
    stored: list[MemoryItem] = []
    questions: list[UpdateQuestion] = []
    for plan in plans:
        verdict, item, question = await _reconcile(batch, plan, vectors, session_id)
        added += verdict == "added"
        updated += verdict == "updated"
        skipped += verdict == "skipped"
        if item is not None:
            stored.append(item)
        if question is not None:
            questions.append(question)
    return ExtractionOutcome(added, updated, skipped, tuple(stored), questions=tuple(questions))


async def _reconcile(
    batch: MemoryBatch, plan: Plan, vectors: dict[str, Embedding], session_id: int
) -> tuple[str, MemoryItem | None, UpdateQuestion | None]:
    """Add, update (supersede) or skip one validated candidate, or ask the person."""
    candidate = plan.candidate
    vector = vectors[candidate.content]
    action, target = await _match(batch, plan, vectors)
    if candidate.unsure and (action != "add" or target is not None):
        log.info("memory.unsure_match_skipped", user_id=batch.user_id)
        return "skipped", None, None
    if action == "skip":
        if target is not None and target.live:
            await _mentioned_again(batch, plan, target, vectors, session_id)
        return "skipped", None, None
    if target is not None and (target.source == "user" or target.pinned):
        question = await ask_update(batch, target, candidate)
        log.info(
            "memory.contradiction_asked" if question else "memory.contradiction_skipped",
            user_id=batch.user_id,
            memory_id=target.id,
            reason="pinned" if target.pinned else "explicit",
        )
        return "skipped", None, question
    thread_id = await _thread_of(batch, plan, target, vector, session_id)
    candidate = replace(candidate, thread_id=thread_id)
    if target is None:
        item = await batch.add(candidate, source="extracted", actor="extraction", embedding=vector)
        return "added", item, None
    item = await batch.supersede(
        target.short_id, candidate, source="extracted", actor="extraction", embedding=vector
    )
    return "updated", item, None


async def _thread_of(
    batch: MemoryBatch,
    plan: Plan,
    target: MemoryItem | None,
    vector: Embedding,
    session_id: int,
) -> int | None:
    """The thread a new memory (or new version of `target`) is filed under, if any."""
    if plan.candidate.category not in THREADED_CATEGORIES:
        return None
    kept = target.thread_id if target is not None else None
    if kept is not None and await touch(batch, kept, session_id):
        return kept
    title = thread_title(plan.thread, plan.candidate.content)
    return await attach(batch, title, vector, session_id)


async def _mentioned_again(
    batch: MemoryBatch,
    plan: Plan,
    known: MemoryItem,
    vectors: dict[str, Embedding],
    session_id: int,
) -> None:
    """A live memory was said again: it is affirmed (more confident, its decay
    restarted), it stays relevant longer, and its situation came up in this session too
    (a memory without a live thread gets one now). The restatement is not added to its
    sources: undoing an import must not take a memory known before it."""
    candidate = plan.candidate
    if known.expires_at is not None and candidate.expires_at is not None:
        await batch.refresh_expiry(known, candidate.expires_at, actor="extraction")
    await affirm(
        batch, known.short_id, via="restated", actor="extraction", expires_at=candidate.expires_at
    )
    if candidate.category not in THREADED_CATEGORIES:
        return
    if known.thread_id is not None and await touch(batch, known.thread_id, session_id):
        return
    if known.category in THREADED_CATEGORIES:
        title = thread_title(plan.thread, known.content)
        thread_id = await attach(batch, title, vectors[candidate.content], session_id)
        await file_under(batch, known.id, thread_id)


async def _match(
    batch: MemoryBatch, plan: Plan, vectors: dict[str, Embedding]
) -> tuple[str, MemoryItem | None]:
    """('skip', known item or None), ('supersede', older item) or ('add', None)."""
    candidate = plan.candidate
    vector = vectors[candidate.content]
    same = await batch.by_hash(content_hash(candidate.content), statuses=KEPT)
    if same is not None:
        return "skip", same
    if await batch.similar(
        vector, limit=1, min_similarity=DUPLICATE_SIMILARITY, statuses=("forgotten",)
    ):
        return "skip", None  # the person asked to forget this
    if plan.same_as:
        known = await _named(batch, plan.same_as, vectors.get(plan.same_as))
        if known is not None:
            return "skip", known
    if plan.supersedes:
        named = await _named(batch, plan.supersedes, vectors.get(plan.supersedes))
        if named is not None and _other_subject(candidate.content, named.content):
            log.info("memory.supersede_refused", user_id=batch.user_id, memory_id=named.id)
        elif named is not None:
            return "supersede", named
    if not (plan.supersedes or plan.same_as) and has_ending(candidate.content):
        ended = await _ended(batch, candidate, vector)
        if ended is not None:
            log.info("memory.supersede_by_cue", user_id=batch.user_id, memory_id=ended.id)
            return "supersede", ended
    return "add", None


async def _ended(batch: MemoryBatch, candidate: Candidate, vector: Embedding) -> MemoryItem | None:
    """The live memory a candidate with an ending cue ends, if the nearest one of its
    category or subject says the same thing without the cue."""
    near = await batch.similar(vector, limit=3, min_similarity=ENDED_NEAR)
    for item, similarity in near:
        if item.category != candidate.category and not _same_subject(
            candidate.content, item.content
        ):
            continue
        if has_ending(item.content) or _other_subject(candidate.content, item.content):
            return None
        if _other_subject(item.content, candidate.content) or _owned(candidate.content) - _owned(
            item.content
        ):
            return None  # about someone else, or something of someone's ("Sam's clinic")
        close = overlap(candidate.content, item.content) >= ENDED_OVERLAP
        return item if close or similarity >= ENDED_SIMILARITY else None
    return None


def _owned(text: str) -> set[str]:
    """Whose things a fact's opening is about, by name ("Sam's clinic" → {"sam"})."""
    opening = text.split()[: SUBJECT_WORDS + 1]
    return {
        word.casefold().removesuffix("'s")
        for word in opening
        if word[:1].isupper() and word.casefold().endswith("'s") and word.casefold() != "person's"
    }


def _same_subject(new: str, old: str) -> bool:
    """Both facts open on the same people (by relation or name)."""
    a = " ".join(new.split()[:SUBJECT_WORDS])
    b = " ".join(old.split()[:SUBJECT_WORDS])
    return (owner_kin(a), names(a)) == (owner_kin(b), names(b))


def _other_subject(new: str, old: str) -> bool:
    """The new fact is about someone (sister, friend, boss: named in its first words)
    the old one does not name, by relation or by name: it cannot replace a fact about
    the person or about another."""
    opening = " ".join(new.split()[:SUBJECT_WORDS])
    others = owner_kin(opening) - set(kin_terms(old))
    return bool(others) and not names(opening) & names(old)


async def _named(batch: MemoryBatch, text: str, vector: Embedding | None) -> MemoryItem | None:
    """The live memory a verdict names (by label like `m3`, or by text)."""
    label = _LABEL.fullmatch(text.strip().lower())
    if label is not None:
        try:
            item = to_item(await batch.row(int(label.group(1)), for_update=False))
        except MemoryNotFound:
            return None
        return item if item.live else None
    if vector is None:
        return None
    found = await batch.similar(vector, limit=1, min_similarity=SUPERSEDES_MATCH)
    return found[0][0] if found else None


async def save_explicit(
    batch: MemoryBatch, candidate: Candidate, vector: Embedding | None
) -> MemoryItem:
    """Store what the person asked to remember; an extracted copy of it becomes theirs,
    and their own memory said again is affirmed."""
    same = await batch.by_hash(content_hash(candidate.content))
    if same is not None and (same.source == "user" or same.pinned):
        await batch.add_sources(same.short_id, candidate.source_message_ids)
        return await affirm(batch, same.short_id, via="restated", actor="user")
    if same is None and vector is not None:
        near = await batch.similar(vector, limit=1, min_similarity=DUPLICATE_SIMILARITY)
        if near and near[0][0].source != "user" and not near[0][0].pinned:
            same = near[0][0]
    if same is not None:
        return await batch.supersede(
            same.short_id, candidate, source="user", actor="user", embedding=vector
        )
    return await batch.add(candidate, source="user", actor="user", embedding=vector)
