"""Per-person turn locks: one turn at a time for a person, others unaffected, nothing kept."""

from __future__ import annotations

import asyncio

from bot.turns import TurnLocks


async def test_a_persons_turns_run_one_at_a_time_and_others_run_alongside() -> None:
    locks = TurnLocks()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def turn(user: int, name: str, *, wait: bool = False) -> None:
        async with locks.hold(user):
            order.append(f"{name} in")
            if wait:
                first_in.set()
                await release.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(turn(1, "a1", wait=True))
    await first_in.wait()
    second = asyncio.create_task(turn(1, "a2"))
    await turn(2, "b")  # another person is not held up
    await asyncio.sleep(0)
    assert order == ["a1 in", "b in", "b out"]
    release.set()
    await asyncio.gather(first, second)
    assert order[3:] == ["a1 out", "a2 in", "a2 out"]
    assert len(locks) == 0


async def test_a_failed_turn_releases_the_lock() -> None:
    locks = TurnLocks()
    try:
        async with locks.hold(7):
            raise RuntimeError("model exploded")
    except RuntimeError:
        pass
    async with asyncio.timeout(1), locks.hold(7):
        pass
    assert len(locks) == 0
