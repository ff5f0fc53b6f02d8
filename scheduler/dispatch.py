"""Sending one claimed outreach row: the rules in code, then the model, then the outbox
steps around delivery (`sending` committed before, `sent` after)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog

from bot import metrics
from bot.domain import Reply
from bot.errors import DeliveryFailed, LLMUnavailable
from bot.logs import bind_person
from memory.local_time import zone_of
from memory.store.facts import Facts, read_facts
from memory.store.outbox import (
    FINAL,
    Claim,
    Delivered,
    FollowedEvent,
    begin_sending,
    finish,
    finish_sent,
    followed_events,
    merged_counts,
    release,
)
from memory.store.records import Person
from scheduler.claims import effective_time
from scheduler.compose import Occasion, compose
from scheduler.deps import SchedulerDeps, lone
from scheduler.prompts import clingy, describe_event
from scheduler.rules import GO, WAIT, Limits, checkin_verdict, followup_verdict, resume_at

log = structlog.get_logger(__name__)


def limits_of(deps: SchedulerDeps) -> Limits:
    """The rule thresholds from the configuration."""
    return Limits(deps.config.recent_activity, deps.config.max_unanswered)


@dataclass(frozen=True, slots=True)
class _Context:
    """What sending a batch of claims reads once for all of them."""

    facts: dict[int, Facts]
    people: dict[int, Person]
    events: dict[int, list[FollowedEvent]]
    merged: dict[int, Counter[str]]


async def _context(deps: SchedulerDeps, claims: Sequence[Claim]) -> _Context:
    user_ids = [c.user_id for c in claims]
    facts = await read_facts(deps.sessions, user_ids)
    people = {p.id: p for p in await deps.store.persons_by_ids(user_ids)}
    events = await followed_events(deps.sessions, [c.id for c in claims])
    merged = await merged_counts(deps.sessions, [c.id for c in claims])
    return _Context(dict(facts), people, dict(events), dict(merged))


async def _send_one(deps: SchedulerDeps, claim: Claim, context: _Context) -> str:
    with bind_person(user_id=claim.user_id):
        try:
            outcome = await send_claim(
                deps,
                claim,
                context.facts.get(claim.user_id),
                context.people.get(claim.user_id),
                context.events.get(claim.id, []),
            )
        except Exception:
            # The row stays claimed until its lease runs out, then it is retried.
            log.exception("outreach.error", outreach_id=claim.id, kind=claim.kind)
            outcome = "error"
    _count(claim, outcome, context.merged.get(claim.id, Counter()))
    return outcome


async def dispatch(deps: SchedulerDeps, claims: Sequence[Claim]) -> Counter[str]:
    """Send (or skip) every claimed row, a few at a time; counts outcomes."""
    if not claims:
        return Counter()
    context = await _context(deps, claims)
    gate = asyncio.Semaphore(deps.config.concurrency)

    async def one(claim: Claim) -> str:
        async with gate:
            return await _send_one(deps, claim, context)

    return Counter(await asyncio.gather(*(one(c) for c in claims)))


ClaimSome = Callable[[int], Awaitable[tuple[list[Claim], int]]]
"""Claims up to n rows; returns the pending claims and how many rows were taken."""


async def dispatch_as_claimed(deps: SchedulerDeps, claim_some: ClaimSome) -> Counter[str]:
    """Keep `concurrency` sends going: claim as many rows as slots are free (so each
    process takes only what it has room for, and the rest stays for the others); a freed
    slot looks again, so people who fall due meanwhile are taken at once; until nothing
    is due and nothing runs. `claimed` counts the rows taken."""
    outcomes: Counter[str] = Counter()
    running: set[asyncio.Task[str]] = set()
    due = True
    try:
        while True:
            free = deps.config.concurrency - len(running)
            if due and free > 0:
                claims, taken = await claim_some(free)
                outcomes["claimed"] += taken
                due = taken >= free
                if claims:
                    context = await _context(deps, claims)
                    running |= {asyncio.create_task(_send_one(deps, c, context)) for c in claims}
                elif due:
                    continue  # taken but all final at once (missed, paused): claim again
            if not running:
                return outcomes
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            outcomes.update(task.result() for task in done)
            due = True  # time passed: more may be due now (the spread brings them in)
    finally:
        for task in running:
            task.cancel()


def _count(claim: Claim, outcome: str, merged: Counter[str]) -> None:
    """Count the row's outcome; once it is final, the rows merged into it share it."""
    status, _, reason = outcome.partition(":")
    metrics.record_outreach(claim.kind, status, reason or None)
    if status in FINAL:
        for kind, count in merged.items():
            metrics.record_outreach(kind, status, reason or None, count)


def _verdict(
    claim: Claim, facts: Facts, events: Sequence[FollowedEvent], now: datetime, limits: Limits
) -> str:
    if claim.kind == "checkin":
        return checkin_verdict(facts, now, limits)
    if not events:
        return "forgotten"
    latest = max(effective_time(e.event_at, facts.timezone) for e in events)
    return followup_verdict(facts, now, limits, latest)


def _expired(deps: SchedulerDeps, claim: Claim, now: datetime) -> bool:
    window = deps.config.grace if claim.kind == "checkin" else deps.config.followup_window
    return now - claim.due_at > window


async def _skip(deps: SchedulerDeps, claim: Claim, reason: str) -> str:
    await finish(lone(deps), claim.id, status="skipped", reason=reason)
    log.info("outreach.skipped", outreach_id=claim.id, kind=claim.kind, reason=reason)
    return f"skipped:{reason}"


async def send_claim(
    deps: SchedulerDeps,
    claim: Claim,
    facts: Facts | None,
    person: Person | None,
    events: Sequence[FollowedEvent] = (),
) -> str:
    """Check the rules, compose, and deliver one claimed row; returns the outcome."""
    now = deps.clock.now()
    if facts is None or person is None:
        return "gone"
    if _expired(deps, claim, now):
        return await _skip(deps, claim, "missed")
    verdict = _verdict(claim, facts, events, now, limits_of(deps))
    if verdict == WAIT:
        until = resume_at(facts, now, limits_of(deps))
        await release(lone(deps), claim, until=until, failed_attempt=False)
        return "waiting"
    if verdict != GO:
        return await _skip(deps, claim, verdict)
    described = tuple(
        describe_event(e.content, e.event_at, zone_of(facts.timezone)) for e in events
    )
    occasion = Occasion(checkin=claim.kind == "checkin", events=described)
    try:
        decision = await compose(deps, person, occasion, now)
    except LLMUnavailable as exc:
        return await _model_failed(deps, claim, now, exc)
    message = decision.message.strip()
    if not decision.send or not message:
        return await _skip(deps, claim, "nothing_to_say")
    if clingy(message):
        return await _skip(deps, claim, "clingy_draft")
    return await _deliver(deps, claim, message)


async def _model_failed(
    deps: SchedulerDeps, claim: Claim, now: datetime, exc: LLMUnavailable
) -> str:
    log.warning("outreach.model_failed", outreach_id=claim.id, error=type(exc).__name__)
    if claim.attempts + 1 >= deps.config.max_attempts:
        await finish(lone(deps), claim.id, status="failed", reason="llm_unavailable")
        return "failed:llm_unavailable"
    until = now + deps.config.retry_delay
    await release(lone(deps), claim, until=until, failed_attempt=True)
    return "retry"


async def _deliver(deps: SchedulerDeps, claim: Claim, message: str) -> str:
    try:
        (embedding,) = await deps.memories.embed([message])
    except Exception:
        log.warning("outreach.embedding_failed", outreach_id=claim.id)
        embedding = None
    lease_until = deps.clock.now() + deps.config.lease
    if not await begin_sending(lone(deps), claim, text_=message, lease_until=lease_until):
        log.info("outreach.claim_lost", outreach_id=claim.id)
        return "lost"
    try:
        recipient, message_id = await deps.outbound.send(
            claim.user_id, Reply(message, private=True)
        )
    except DeliveryFailed as exc:
        await finish(
            lone(deps), claim.id, status="failed", reason=exc.reason, error=exc.detail[:500]
        )
        log.info("outreach.failed", outreach_id=claim.id, kind=claim.kind, reason=exc.reason)
        return f"failed:{exc.reason}"
    await finish_sent(
        lone(deps),
        claim,
        delivered=Delivered(recipient.platform, recipient.chat_id, message_id),
        text_=message,
        embedding=embedding,
        now=deps.clock.now(),
        idle_gap=deps.config.idle_gap,
    )
    log.info("outreach.sent", outreach_id=claim.id, kind=claim.kind, platform=recipient.platform)
    return "sent"
