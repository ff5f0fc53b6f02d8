"""The minute tick's jobs: the outbox recovery, due daily check-ins, and follow-ups
after remembered events. Each is a plain idempotent `async def` of the collaborators."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import structlog

from bot import metrics
from memory.store.outbox import Claim, reclaim_pending, recover
from memory.store.timezone_asks import claim_second_asks
from scheduler.claims import claim_checkins, claim_followups, schedule_new
from scheduler.deps import SchedulerDeps
from scheduler.dispatch import dispatch, dispatch_as_claimed

log = structlog.get_logger(__name__)


async def run_outbox(deps: SchedulerDeps) -> Counter[str]:
    """Mark rows interrupted mid-send as unknown (never resent), then retry rows whose
    lease ran out: released to wait, or left by a process that stopped."""
    now = deps.clock.now()
    interrupted = await recover(deps.sessions, now=now)
    for kind, count in interrupted.items():
        metrics.record_outreach(kind, "unknown", "interrupted", count)
    if interrupted:
        log.warning("outreach.interrupted", count=interrupted.total())
    outcomes: Counter[str] = Counter()
    while True:
        claims = await reclaim_pending(
            deps.sessions,
            now=deps.clock.now(),
            lease=deps.config.lease,
            limit=deps.config.batch_size,
        )
        outcomes += await dispatch(deps, claims)
        if len(claims) < deps.config.batch_size:
            return outcomes


async def run_checkins(deps: SchedulerDeps) -> Counter[str]:
    """Schedule new people, then claim and send every due check-in: as many claimed at a
    time as this process has free slots (SKIP LOCKED: other processes take the rest)."""
    spread = deps.config.spread
    while await schedule_new(deps.sessions, now=deps.clock.now(), spread=spread) >= 1000:
        pass

    async def claim_some(free: int) -> tuple[list[Claim], int]:
        limit = min(free, deps.config.batch_size)
        return await claim_checkins(
            deps.sessions, now=deps.clock.now(), config=deps.config, limit=limit
        )

    outcomes = await dispatch_as_claimed(deps, claim_some)
    if outcomes["claimed"]:
        log.info("checkins.done", **outcomes)
    return outcomes


async def run_followups(deps: SchedulerDeps) -> Counter[str]:
    """Claim and send the follow-ups due on their own (not folded into a check-in),
    page by page."""
    outcomes: Counter[str] = Counter()
    after: tuple[datetime, int] | None = None
    while True:
        claims, after = await claim_followups(
            deps.sessions, now=deps.clock.now(), config=deps.config, after=after
        )
        outcomes += await dispatch(deps, claims)
        if after is None:
            break
    if outcomes:
        log.info("followups.done", **outcomes)
    return outcomes


async def run_notices(deps: SchedulerDeps) -> Counter[str]:
    """Release the notices held for people whose allowed window is open now, and drop
    the stale ones (counted as `notice_<outcome>`)."""
    released = await deps.memory.notices.release()
    return Counter({f"notice_{outcome}": count for outcome, count in released.items()})


async def minute_tick(deps: SchedulerDeps) -> Counter[str]:
    """Everything due this minute, in order: recovery, check-ins, follow-ups, held
    notices, second timezone questions; then the coordination rows that ran out."""
    outcomes = await run_outbox(deps)
    outcomes += await run_checkins(deps)
    outcomes += await run_followups(deps)
    outcomes += await run_notices(deps)
    outcomes += await run_timezone_asks(deps)
    pruned = await deps.coordination.prune() if deps.coordination is not None else 0
    if pruned:
        outcomes["coordination_pruned"] += pruned
    return outcomes


async def run_timezone_asks(deps: SchedulerDeps) -> Counter[str]:
    """Ask once more, on their own, the people who never answered the timezone question,
    at the hour they were last active a day later (counted as `timezone_ask_<outcome>`)."""
    outcomes: Counter[str] = Counter()
    if deps.onboarding is None:
        return outcomes
    for user_id in await claim_second_asks(deps.sessions, now=deps.clock.now()):
        outcome = await deps.onboarding.ask_again(user_id, deps.outbound)
        outcomes[f"timezone_ask_{outcome}"] += 1
    if outcomes:
        log.info("timezone_asks.done", **outcomes)
    return outcomes
