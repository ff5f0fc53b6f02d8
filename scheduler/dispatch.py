"""Sending one claimed outreach row: the rules in code, then the model, then the outbox
steps around delivery (`sending` committed before, `sent` after)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
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
from scheduler.deps import SchedulerDeps
from scheduler.prompts import clingy, describe_event
from scheduler.rules import GO, WAIT, Limits, checkin_verdict, followup_verdict, resume_at

log = structlog.get_logger(__name__)


def limits_of(deps: SchedulerDeps) -> Limits:
    """The rule thresholds from the configuration."""
    return Limits(deps.config.recent_activity, deps.config.max_unanswered)


async def dispatch(deps: SchedulerDeps, claims: Sequence[Claim]) -> Counter[str]:
    """Send (or skip) every claimed row, a few at a time; counts outcomes."""
    if not claims:
        return Counter()
    user_ids = [c.user_id for c in claims]
    facts = await read_facts(deps.sessions, user_ids)
    people = {p.id: p for p in await deps.store.persons_by_ids(user_ids)}
    events = await followed_events(deps.sessions, [c.id for c in claims])
    merged = await merged_counts(deps.sessions, [c.id for c in claims])
    gate = asyncio.Semaphore(deps.config.concurrency)

    async def one(claim: Claim) -> str:
        async with gate:
            with bind_person(user_id=claim.user_id):
                try:
                    outcome = await send_claim(
                        deps,
                        claim,
                        facts.get(claim.user_id),
                        people.get(claim.user_id),
                        events.get(claim.id, []),
                    )
                except Exception:
                    # The row stays claimed until its lease runs out, then it is retried.
                    log.exception("outreach.error", outreach_id=claim.id, kind=claim.kind)
                    outcome = "error"
            _count(claim, outcome, merged.get(claim.id, Counter()))
            return outcome

    return Counter(await asyncio.gather(*(one(c) for c in claims)))


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
    await finish(deps.sessions, claim.id, status="skipped", reason=reason)
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
        await release(deps.sessions, claim, until=until, failed_attempt=False)
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
        await finish(deps.sessions, claim.id, status="failed", reason="llm_unavailable")
        return "failed:llm_unavailable"
    until = now + deps.config.retry_delay
    await release(deps.sessions, claim, until=until, failed_attempt=True)
    return "retry"


async def _deliver(deps: SchedulerDeps, claim: Claim, message: str) -> str:
    try:
        (embedding,) = await deps.memories.embed([message])
    except Exception:
        log.warning("outreach.embedding_failed", outreach_id=claim.id)
        embedding = None
    lease_until = deps.clock.now() + deps.config.lease
    if not await begin_sending(deps.sessions, claim, text_=message, lease_until=lease_until):
        log.info("outreach.claim_lost", outreach_id=claim.id)
        return "lost"
    try:
        recipient, message_id = await deps.outbound.send(
            claim.user_id, Reply(message, private=True)
        )
    except DeliveryFailed as exc:
        await finish(
            deps.sessions, claim.id, status="failed", reason=exc.reason, error=exc.detail[:500]
        )
        log.info("outreach.failed", outreach_id=claim.id, kind=claim.kind, reason=exc.reason)
        return f"failed:{exc.reason}"
    await finish_sent(
        deps.sessions,
        claim,
        delivered=Delivered(recipient.platform, recipient.chat_id, message_id),
        text_=message,
        embedding=embedding,
        now=deps.clock.now(),
        idle_gap=deps.config.idle_gap,
    )
    log.info("outreach.sent", outreach_id=claim.id, kind=claim.kind, platform=recipient.platform)
    return "sent"
