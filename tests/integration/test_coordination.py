"""Per-person coordination across processes, on real PostgreSQL: each "process" here is
its own `SharedTurnLocks` (its own holder name), `BurstCoalescer` or limiter over the
same database, as two `companion run` processes would be."""

from __future__ import annotations

import asyncio
import contextlib
import time

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from adapters.bursts import BurstCoalescer
from adapters.ratelimit import SharedRateLimiter
from adapters.telegram_bot.flood import FloodControl, SharedPace
from bot.background import BackgroundTasks
from bot.conversation import Conversation, ConversationConfig, handle_message, record_message
from bot.llm import Completion, LLMRequest
from bot.prompting import load_persona
from bot.turns import SharedTurnLocks
from memory.store.conversations import SqlConversationStore
from memory.store.coordination import SqlCoordination, forget_accounts
from memory.store.database import autocommit_session_factory
from tests.conftest import FakeClock
from tests.integration.conftest import says

Db = async_sessionmaker[AsyncSession]


def coordination(engine: AsyncEngine) -> SqlCoordination:
    return SqlCoordination(autocommit_session_factory(engine), engine)


async def a_person(db: Db) -> int:
    async with db.begin() as session:
        return int(
            (
                await session.execute(
                    text("INSERT INTO users (display_name) VALUES ('Ada') RETURNING id")
                )
            ).scalar_one()
        )


async def test_one_persons_turns_run_one_at_a_time_across_processes(
    engine: AsyncEngine, db: Db
) -> None:
    user = await a_person(db)
    first = SharedTurnLocks(coordination(engine), lease=10)
    second = SharedTurnLocks(coordination(engine), lease=10)
    order: list[str] = []

    async def turn(locks: SharedTurnLocks, name: str, hold: float) -> None:
        async with locks.hold(user):
            order.append(f"{name} in")
            await asyncio.sleep(hold)
            order.append(f"{name} out")

    started = asyncio.create_task(turn(first, "a", 0.3))
    await asyncio.sleep(0.05)
    await asyncio.gather(started, turn(second, "b", 0))

    assert order == ["a in", "a out", "b in", "b out"]
    await first.aclose()
    await second.aclose()
    async with db() as session:
        assert (await session.execute(text("SELECT count(*) FROM turn_claims"))).scalar() == 0


async def test_a_dead_processes_turn_is_free_once_its_lease_runs_out(
    engine: AsyncEngine, db: Db
) -> None:
    user = await a_person(db)
    store = coordination(engine)
    assert await store.claim_turn(user, "dead-process", lease=1.0)  # never released
    survivor = SharedTurnLocks(store, lease=10)

    started = time.monotonic()
    async with asyncio.timeout(5), survivor.hold(user):
        waited = time.monotonic() - started

    assert 0.5 < waited < 3.0
    await survivor.aclose()


async def test_a_dead_processes_turn_is_free_at_once_when_its_liveness_lock_is_gone(
    engine: AsyncEngine, db: Db
) -> None:
    user = await a_person(db)
    dead, survivor = SharedTurnLocks(coordination(engine)), SharedTurnLocks(coordination(engine))
    holding = asyncio.Event()

    async def dies_mid_turn() -> None:
        async with dead.hold(user):
            holding.set()
            await asyncio.sleep(60)

    turn = asyncio.create_task(dies_mid_turn())
    await holding.wait()
    turn.cancel()  # the turn's task is gone but its claim stays: no release ran
    with contextlib.suppress(asyncio.CancelledError):
        await turn
    async with db.begin() as session:  # as if the release never happened (SIGKILL)
        await session.execute(
            text("INSERT INTO turn_claims (user_id, holder, holder_key, expires_at) "
                 "VALUES (:u, :h, :k, now() + interval '30 seconds') ON CONFLICT (user_id) "
                 "DO UPDATE SET holder = :h, holder_key = :k, "
                 "expires_at = now() + interval '30 seconds'"),
            {"u": user, "h": dead.holder, "k": dead.holder_key},
        )  # fmt: skip
    async with asyncio.timeout(2):  # alive: its lease (30 s) holds the person
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1), survivor.hold(user):
                raise AssertionError("taken from a live holder")
    await dead.aclose()  # the process dies: its liveness connection closes

    started = time.monotonic()
    async with asyncio.timeout(5), survivor.hold(user):
        waited = time.monotonic() - started
    assert waited < 1.0  # not the 30 s lease
    await survivor.aclose()


async def test_a_held_turn_is_renewed_while_it_runs(engine: AsyncEngine, db: Db) -> None:
    user = await a_person(db)
    store = coordination(engine)
    holder = SharedTurnLocks(store, lease=1.0)
    async with holder.hold(user):
        await asyncio.sleep(1.6)  # longer than the lease: renewed meanwhile
        assert not await store.claim_turn(user, "another-process", lease=1.0)
    assert await store.claim_turn(user, "another-process", lease=1.0)
    await holder.aclose()


class SlowModel:
    """Answers after a pause, naming how many user turns it saw."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: LLMRequest) -> Completion:
        self.calls += 1
        await asyncio.sleep(0.3)
        return Completion(text=f"reply {self.calls}", model="slow")


def process(engine: AsyncEngine, db: Db, llm: SlowModel, clock: FakeClock) -> Conversation:
    return Conversation(
        store=SqlConversationStore(db),
        llm=llm,  # type: ignore[arg-type]
        clock=clock,
        persona=load_persona(),
        config=ConversationConfig(),
        background=BackgroundTasks(),
        turns=SharedTurnLocks(coordination(engine), lease=10),
    )


async def test_two_processes_answer_a_persons_quick_messages_once(
    engine: AsyncEngine, db: Db, clock: FakeClock
) -> None:
    llm = SlowModel()
    one, two = process(engine, db, llm, clock), process(engine, db, llm, clock)
    await handle_message(says("hello", message_id="0"), conversation=one)  # the person exists
    # A burst spread by a load balancer: each process stored one message; both bursts end.
    await record_message(says("first", message_id="1"), conversation=one)
    await record_message(says("second", message_id="2"), conversation=two)

    replies = await asyncio.gather(
        handle_message(says("first", message_id="1"), conversation=one),
        handle_message(says("second", message_id="2"), conversation=two),
    )

    for process_ in (one, two):
        assert isinstance(process_.turns, SharedTurnLocks)
        await process_.turns.aclose()
    spoken = [r for r in replies if not r.silent]
    assert len(spoken) == 1  # the second turn found both messages answered
    assert llm.calls == 2
    async with db() as session:
        statuses = (
            await session.execute(
                text("SELECT content, status FROM messages WHERE role = 'user' ORDER BY id")
            )
        ).all()
    assert [tuple(row) for row in statuses] == [
        ("hello", "answered"),
        ("first", "answered"),
        ("second", "answered"),
    ]


async def test_a_burst_spread_over_processes_is_answered_once_it_is_quiet_everywhere(
    engine: AsyncEngine, db: Db
) -> None:
    answered: list[tuple[str, float]] = []
    started = time.monotonic()

    async def store(item: str) -> None:
        return None

    async def answer(item: str) -> None:
        answered.append((item, time.monotonic() - started))

    window = 0.4
    shared = coordination(engine)
    one = BurstCoalescer(store=store, answer=answer, window=window, shared=shared, name="t")
    two = BurstCoalescer(store=store, answer=answer, window=window, shared=shared, name="t")
    await one.add((1, 1), "a")
    await asyncio.sleep(0.3)
    await two.add((1, 1), "b")  # process two got the burst's second message
    await asyncio.sleep(0.3)
    await one.add((2, 2), "other person")
    await asyncio.sleep(1.0)

    mine = [(item, at) for item, at in answered if item != "other person"]
    # Process one waited for the quiet after "b" (stored by process two), not just its own.
    assert all(at >= 0.3 + window - 0.05 for _, at in mine)
    assert sorted(item for item, _ in mine) == ["a", "b"]  # the turn lock makes one reply


async def test_the_rate_limit_counts_every_processes_messages(engine: AsyncEngine, db: Db) -> None:
    one = SharedRateLimiter(coordination(engine), platform="t", per_minute=0.001, burst=3)
    two = SharedRateLimiter(coordination(engine), platform="t", per_minute=0.001, burst=3)

    taken = [await limiter.take(42) for limiter in (one, two, one, two, one)]

    assert taken == [True, True, True, False, False]
    assert await one.take(43)  # someone else's bucket


async def sent_at(paces: list[SharedPace], per_process: int) -> list[float]:
    """Every "process" (its own flood control, pace and connections) sends `per_process`
    messages to chats of their own, all at once; when each reached Telegram."""
    started = time.monotonic()
    reached: list[float] = []

    async def call() -> bool:
        reached.append(time.monotonic() - started)
        return True

    floods = [FloodControl(overall=pace) for pace in paces]
    await asyncio.gather(
        *(
            flood.process_request(call, (), {}, "sendMessage", {"chat_id": 5000 + n * 100 + i}, 0)
            for n, flood in enumerate(floods)
            for i in range(per_process)
        )
    )
    return sorted(reached)


def busiest_second(times: list[float]) -> int:
    return max(sum(1 for t in times if start <= t < start + 1.0) for start in times)


async def test_the_telegram_pace_is_the_bots_across_processes(engine: AsyncEngine) -> None:
    shared = [SharedPace(coordination(engine), "telegram:1", 20) for _ in range(2)]
    alone = [SharedPace(coordination(engine), f"telegram:{n + 2}", 20) for n in range(2)]

    together = await sent_at(shared, per_process=20)
    apart = await sent_at(alone, per_process=20)  # two bots: each has a pace of its own

    # 40 messages in slots 1/20 s apart, whichever process sent them. A slot is never
    # early, but its statement's round trip varies (the first opens a connection), so a
    # second measured from a late message may hold one more: the pace (28 a second in
    # use) leaves Telegram's 30 that margin.
    assert busiest_second(together) <= 21
    assert together[-1] >= 39 / 20 - 0.05
    assert busiest_second(apart) >= 35  # what two processes' own paces let through


async def test_what_no_longer_coordinates_anything_is_pruned(engine: AsyncEngine, db: Db) -> None:
    user = await a_person(db)
    store = coordination(engine)
    assert await store.claim_turn(user, "gone", lease=1.0)
    await store.mark_burst("t:1:1")
    await store.take_token("t:1", per_minute=20, burst=8)
    await store.take_send_slot("t:bot", gap=0.01)
    assert await store.prune() == 0  # all still matter
    await asyncio.sleep(1.2)

    assert await store.prune(quiet_seconds=1.0) == 4
    async with db() as session:
        for table in ("turn_claims", "burst_marks", "rate_buckets", "send_paces"):
            assert (await session.execute(text(f"SELECT count(*) FROM {table}"))).scalar() == 0


async def test_forgetting_an_account_drops_its_coordination_rows_only(
    engine: AsyncEngine, db: Db
) -> None:
    store = coordination(engine)
    for key in ("t:1:1", "t:1:9", "t:12:12", "d:1:1", "t:1_:1"):
        await store.mark_burst(key)
    for key in ("t:1", "t:12", "d:1"):
        await store.take_token(key, per_minute=20, burst=8)

    async with db.begin() as session:
        await forget_accounts(session, [("t", "1")])

    async with db() as session:
        marks = set(await session.scalars(text("SELECT key FROM burst_marks")))
        buckets = set(await session.scalars(text("SELECT key FROM rate_buckets")))
    assert marks == {"t:12:12", "d:1:1", "t:1_:1"}  # another account's, another platform's
    assert buckets == {"t:12", "d:1"}
