"""Two weeks of daily check-ins for three people in three timezones, across the end of
summer time in Europe (25 October) and in the United States (1 November): one check-in
a day at 09:00 on each person's wall clock, never at night, never twice, none while
paused; each answered hours later."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, time, timedelta

from tests.scenarios.harness import Person, World, assert_quiet_nights

FIRST_DAY = date(2026, 10, 19)
LAST_DAY = date(2026, 11, 2)


def _plan(people: list[Person], pauser: Person) -> list[tuple[datetime, Person, str]]:
    """What everyone writes over the fortnight, in time order: an introduction, then an
    answer to each morning's check-in about four hours later (none while paused)."""
    plan: list[tuple[datetime, Person, str]] = []
    for person in people:
        intro = person.at(FIRST_DAY + timedelta(days=1), "10:00")
        city = person.zone.split("/")[-1].replace("_", " ")
        plan += [
            (intro, person, f"/timezone {city}"),
            (intro + timedelta(minutes=1), person, "hi! nice to meet you"),
        ]
        day = FIRST_DAY + timedelta(days=2)
        while day <= LAST_DAY:
            if not (person is pauser and date(2026, 10, 24) <= day <= date(2026, 10, 26)):
                plan.append((person.at(day, "13:10"), person, f"morning was busy, {day:%A} ok"))
            day += timedelta(days=1)
    plan += [
        (pauser.at(date(2026, 10, 23), "20:00"), pauser, "/pause"),
        (pauser.at(date(2026, 10, 26), "20:00"), pauser, "/resume"),
    ]
    return sorted(plan, key=lambda step: step[0])


async def test_one_checkin_a_day_at_nine_local_across_both_dst_changes(
    world: World, maya: Person, tomas: Person, aiko: Person
) -> None:
    people = [maya, tomas, aiko]
    world.grid = timedelta(hours=4)  # check-ins are stepped to when due; keep it short
    for when, person, words in _plan(people, pauser=aiko):
        await world.advance_to(when)
        reply = await person.says(words)
        if words.startswith("/timezone"):
            assert reply.text == f"Timezone set to {person.zone}.", reply.text
    end = maya.at(LAST_DAY, "23:00")
    await world.advance_to(end)

    for person in people:
        checkins = world.sent_to(person, proactive=True)
        days = Counter(person.local(s.at).date() for s in checkins)
        assert all(n == 1 for n in days.values()), world.transcript(person)
        for sent in checkins:
            local = person.local(sent.at).time()
            assert time(9, 0) <= local < time(9, 1), world.transcript(person)
            assert sent.text == "Good morning! How is the day starting?"
            assert sent.reply.private and sent.chat_id == person.chat_id
        assert_quiet_nights(world, person)
        paused = {date(2026, 10, 24), date(2026, 10, 25), date(2026, 10, 26)}
        at_end = person.local(end)  # 3 November in Tokyo, still 2 November elsewhere
        last = at_end.date() - timedelta(days=0 if at_end.time() >= time(9, 1) else 1)
        expected = {
            FIRST_DAY + timedelta(days=n) for n in range(2, (last - FIRST_DAY).days + 1)
        } - (paused if person is aiko else set())
        assert set(days) == expected, world.transcript(person)

    # The same local 09:00 is a different UTC hour on each side of the change.
    lisbon = {tomas.local(s.at).date(): s.at for s in world.sent_to(tomas, proactive=True)}
    assert lisbon[date(2026, 10, 24)].hour == 8 and lisbon[date(2026, 10, 26)].hour == 9
    la = {maya.local(s.at).date(): s.at for s in world.sent_to(maya, proactive=True)}
    assert la[date(2026, 10, 31)].hour == 16 and la[date(2026, 11, 2)].hour == 17
    # The model is told the local time it composes at, and never at any other hour.
    decided = [p for p in world.model.prompts if p.tool == "decide_checkin"]
    assert len(decided) == sum(len(world.sent_to(p, proactive=True)) for p in people)
    assert all("It is 09:00 on" in p.text for p in decided)
