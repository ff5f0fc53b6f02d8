"""Telegram flood control paces sends the way Telegram asks: a small burst then about one
message a second in a private chat, 20 a minute in a group, and overall one message every
1/28 s (under Telegram's 30 in any second); chat actions (typing) count toward neither.

`FloodControl.process_request` is what python-telegram-bot calls for every request; it
runs here on a virtual-time loop, so seconds of pacing take milliseconds and the send
times are exact.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from adapters.telegram_bot.flood import OVERALL_PER_SECOND, FloodControl, SharedPace
from tests.support.virtual_time import run_virtual

EPSILON = 1e-6
GAP = 1 / OVERALL_PER_SECOND  # one message every 1/28 s overall: under 30 in any second


async def send_times(flood: FloodControl, requests: list[tuple[str, int]]) -> list[float]:
    """Start every (method, chat id) request at once; when each reached Telegram."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    reached: dict[int, float] = {}

    def request(index: int) -> asyncio.Task[object]:
        async def call() -> bool:
            reached[index] = loop.time() - start
            return True

        method, chat = requests[index]
        return asyncio.ensure_future(
            flood.process_request(call, (), {}, method, {"chat_id": chat}, None)
        )

    await asyncio.gather(*(request(i) for i in range(len(requests))))
    return [reached[i] for i in range(len(requests))]


def test_the_virtual_clock_jumps_instead_of_waiting() -> None:
    async def nap() -> float:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600)
        return loop.time()

    assert run_virtual(nap()) == pytest.approx(3600)


def test_a_private_chat_gets_a_small_burst_then_one_message_a_second() -> None:
    times = run_virtual(send_times(FloodControl(), [("sendMessage", 7)] * 8))

    assert times[:3] == pytest.approx([0, GAP, 2 * GAP], abs=1e-4)  # the overall pace
    gaps = [later - earlier for earlier, later in itertools.pairwise(times[3:])]
    assert times[3] == pytest.approx(1.0, abs=1e-3)
    assert gaps == pytest.approx([1.0] * 4, abs=1e-3)


def test_other_chats_and_typing_are_not_held_up_by_a_busy_chat() -> None:
    requests = [("sendMessage", 7)] * 6 + [("sendChatAction", 7)] * 3 + [("sendMessage", 8)]
    times = run_virtual(send_times(FloodControl(), requests))

    assert max(times[:6]) == pytest.approx(3.0, abs=1e-3)
    assert times[6:9] == pytest.approx([0, 0, 0], abs=EPSILON)
    assert times[9] == pytest.approx(3 * GAP, abs=1e-3)  # after the three before it, not 1 s


def test_edits_count_toward_the_chat_like_sends() -> None:
    requests = [("editMessageText", 7)] * 3 + [("sendMessage", 7)]
    times = run_virtual(send_times(FloodControl(), requests))

    assert times == pytest.approx([0, GAP, 2 * GAP, 1.0], abs=1e-3)


def test_a_group_gets_twenty_messages_a_minute() -> None:
    times = run_virtual(send_times(FloodControl(), [("sendMessage", -100123)] * 22))

    assert times[:20] == pytest.approx([i * GAP for i in range(20)], abs=1e-4)
    assert times[20:] == pytest.approx([3.0, 6.0], abs=1e-3)


def test_all_chats_together_stay_under_thirty_messages_in_any_second() -> None:
    requests = [("sendMessage", 1000 + i) for i in range(90)]
    times = run_virtual(send_times(FloodControl(), requests))

    ordered = sorted(times)
    assert ordered[0] == pytest.approx(0, abs=EPSILON)
    assert max(times) == pytest.approx(89 * GAP, abs=1e-3)  # one every GAP, no burst
    in_any_second = max(sum(1 for t in ordered if start <= t < start + 1.0) for start in ordered)
    assert in_any_second == OVERALL_PER_SECOND < 30


def test_typing_never_waits_for_the_overall_budget() -> None:
    requests = [("sendMessage", 2000 + i) for i in range(30)]
    requests += [("sendChatAction", 3000 + i) for i in range(30)]
    requests += [("sendMessage", 4000)]
    times = run_virtual(send_times(FloodControl(), requests))

    assert times[30:60] == pytest.approx([0] * 30, abs=EPSILON)  # typing waits for nothing
    assert times[60] == pytest.approx(30 * GAP, abs=1e-3)  # the 31st message, after 30


class Slots:
    """The database's send paces as `SharedPace` sees them: answering, failing, or hung."""

    def __init__(self, *, fails: bool = False, hangs: bool = False) -> None:
        self.fails = fails
        self.hangs = hangs
        self.asked = 0
        self._next = 0.0

    async def take_send_slot(self, key: str, *, gap: float) -> float:
        self.asked += 1
        if self.hangs:
            await asyncio.sleep(3600)
        if self.fails:
            raise ConnectionRefusedError("the database is down")
        now = asyncio.get_running_loop().time()
        slot = max(now, self._next)
        self._next = slot + gap
        return slot - now


def test_a_shared_pace_waits_for_the_slot_the_database_gives() -> None:
    slots = Slots()
    flood = FloodControl(overall=SharedPace(slots, "telegram:1", OVERALL_PER_SECOND))
    times = run_virtual(send_times(flood, [("sendMessage", 1000 + i) for i in range(5)]))

    assert sorted(times) == pytest.approx([n * GAP for n in range(5)], abs=1e-4)
    assert slots.asked == 5


def test_without_the_database_a_process_paces_alone_then_asks_again() -> None:
    slots = Slots(fails=True)
    pace = SharedPace(slots, "telegram:1", OVERALL_PER_SECOND, recheck=30.0)
    flood = FloodControl(overall=pace)

    async def scenario() -> tuple[list[float], list[float]]:
        first = await send_times(flood, [("sendMessage", 1000 + i) for i in range(5)])
        await asyncio.sleep(31)
        slots.fails = False
        later = await send_times(flood, [("sendMessage", 2000 + i) for i in range(3)])
        return first, later

    first, later = run_virtual(scenario())

    assert sorted(first) == pytest.approx([n * GAP for n in range(5)], abs=1e-4)  # all sent
    assert slots.asked == 1 + 3  # alone for 30 s after the failure, then asked again
    assert sorted(later) == pytest.approx([n * GAP for n in range(3)], abs=1e-4)


def test_a_hung_database_holds_a_message_back_half_a_second_at_most() -> None:
    slots = Slots(hangs=True)
    flood = FloodControl(overall=SharedPace(slots, "telegram:1", OVERALL_PER_SECOND))

    times = run_virtual(send_times(flood, [("sendMessage", 1000 + i) for i in range(3)]))

    assert max(times) <= 0.5 + 3 * GAP
    assert slots.asked >= 1
