"""An event mentioned in passing ("job interview Thursday at 10") is remembered with its
date, is in mind while it is coming up, and is followed up once after it has passed, in
the person's daytime, not before."""

from __future__ import annotations

from datetime import date, timedelta

from tests.scenarios.harness import Person, World, assert_in_prompt, assert_quiet_nights

TUESDAY, THURSDAY = date(2026, 10, 20), date(2026, 10, 22)


async def test_an_interview_is_followed_up_once_after_it_passed(world: World, aiko: Person) -> None:
    world.model.extractor.add(
        "interview",
        content="The person has a job interview at Brightline",
        category="event",
        tier="active",
        importance=8,
        event_date="2026-10-22T10:00",
    )
    await world.advance_to(aiko.at(date(2026, 10, 19), "16:05"))
    await aiko.says("/timezone Tokyo")
    await aiko.says("hello! I'm Aiko")
    await world.advance_to(aiko.at(TUESDAY, "19:00"))
    await aiko.says("I have a job interview at Brightline on Thursday at 10, kind of nervous")
    await world.advance(hours=1)

    notices = [s for s in world.sent_to(aiko, proactive=True) if "Brightline" in s.text]
    assert len(notices) == 1 and notices[0].text.startswith("I noted:"), world.transcript(aiko)

    await world.advance_to(aiko.at(TUESDAY + timedelta(days=1), "12:00"))
    await aiko.says("prepping for tomorrow, reading about their products")
    block = world.last_chat_prompt(aiko).memory_block
    assert "job interview at Brightline" in block and "Thu 22 Oct, 10:00" in block, block

    # Thursday: the morning check-in, the interview at 10, nothing from Aiko until the
    # evening; the follow-up comes once the interview is over (plus two hours).
    await world.advance_to(aiko.at(THURSDAY, "18:00"))
    thursday = [
        s for s in world.sent_to(aiko, proactive=True) if aiko.local(s.at).date() == THURSDAY
    ]
    assert len(thursday) == 2, world.transcript(aiko)
    checkin, followup = thursday
    assert aiko.local(checkin.at).strftime("%H:%M") == "09:00"
    assert "How did it go" not in checkin.text
    assert followup.at >= aiko.at(THURSDAY, "12:00"), world.transcript(aiko)
    assert "How did it go?" in followup.text and "Brightline" in followup.text
    asked = [p for p in world.model.prompts if p.tool == "decide_checkin" and p.at == followup.at]
    assert asked, "the follow-up was composed by the model"
    assert_in_prompt(asked[0], "job interview at Brightline (Thu 22 Oct, 10:00)")

    await aiko.says("it went well I think! second round next week")
    await world.advance_to(aiko.at(THURSDAY + timedelta(days=3), "20:00"))
    followups = [s for s in world.sent_to(aiko, proactive=True) if "How did it go" in s.text]
    assert followups == [followup], world.transcript(aiko)
    assert_quiet_nights(world, aiko)
