"""How much of a long conversation the prompt cache serves, under the real API's rules.

A 24-turn conversation of ordinary length (a few sentences a message) with a person the
companion already knows (two dozen memories) runs through the real core — `build_core`,
the router and `handle_message`, the real `AnthropicLLM` on the `anthropic` SDK, the
embedded PostgreSQL — against the loopback Messages API fake, which caches only at
breakpoints, only prefixes past the model's minimum (1,024 tokens for Sonnet 4.5, 4,096
for Haiku 4.5), for 5 minutes, and reports usage as the API does. Turns come 15–45
seconds apart (the fake's cache clock and the core's clock move together). Background
work runs between turns, as in production: extraction after 8 and 16 messages notes a
fact and a thread each time, so memory changes mid-conversation.

Run: `python -m bench.prompt_cache`. Figures over the chat calls of turns 9–24:
`chat_cache_read_share` (cache reads ÷ all input tokens; target ≥ 0.80) and
`chat_input_cost_ratio` (input cost with caching ÷ without, writes at 1.25×, reads at
0.1×; target ≤ 0.30).
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.bootstrap import Core, build_core
from bot.config import Settings
from bot.domain import IncomingMessage
from memory.store.items import Candidate
from tests.fakes.anthropic_api import FakeAnthropicAPI, Step, TextReply, ToolUseReply

CHAT_MODEL = "claude-sonnet-4-5"
FAST_MODEL = "claude-haiku-4-5"
WRITE_PRICE = 1.25
READ_PRICE = 0.1
MEASURED_FROM = 9
START = datetime(2026, 3, 4, 18, 30, tzinfo=UTC)
GAPS = (15, 40, 25, 45, 20, 35)
"""Seconds between turns, cycled: a person reading the reply and typing the next."""

CORE_FACTS = (
    ("Their name is Sofie and they live in Aarhus with their partner Jonas", 9),
    ("They work as a nurse on the cardiology ward at Aarhus University Hospital", 8),
    ("They have a grey cat called Miso who is eleven years old", 7),
    ("Their mother lives alone in Randers and has early-stage Parkinson's", 8),
    ("They are vegetarian and love cooking Indian food on weekends", 5),
    ("They run three times a week and did their first half-marathon last spring", 6),
    ("They find night shifts hard on their sleep and mood", 7),
    ("Their best friend Maja moved to Copenhagen last year and they miss her", 6),
    ("They are learning to play the piano, mostly Satie and Einaudi", 5),
    ("They grew up on the west coast near Ringkøbing and love the sea", 5),
    ("They and Jonas have been together for six years and are thinking about marriage", 7),
    ("They get anxious before performance reviews at work", 6),
    ("Their brother Anders is a chef in Berlin; they talk every Sunday", 5),
    ("They prefer honest, warm answers over cheerful ones when they are down", 8),
    ("They read crime novels before bed, currently a Jussi Adler-Olsen book", 4),
    ("They want to move to a house with a garden within two years", 5),
)
ACTIVE = (
    "They are training for the Aarhus city half-marathon in six weeks",
    "They are worried about a new colleague who keeps skipping handovers",
    "They are helping their mother apply for home care support from the municipality",
    "They started a ceramics evening class and are making a set of bowls",
    "They are saving up for a trip to Portugal with Jonas in the autumn",
    "They have been sleeping badly since the last run of night shifts",
    "They promised to cook dinner for Jonas's parents this Saturday",
    "They are reading about adopting a second cat as company for Miso",
)
NOTED = (
    ("They do their colleague's charting when he leaves early", "fact", "core"),
    ("They plan to talk to their colleague at lunch about handovers", "thread", "active"),
    ("Jonas's father is suspicious of vegetarian food", "relationship", "core"),
    ("They are cooking dal, naan and paneer for Jonas's parents", "event", "active"),
    ("Ten minutes of Satie on the piano calms them before sleep", "preference", "core"),
    ("They and Jonas have saved half of the money for Portugal", "goal", "active"),
)
"""What each extraction (after 8 messages) notes, two items at a time."""
PERSON_MESSAGE = re.compile(r"\[#(\d+) \| THE PERSON")
MESSAGES = (
    "Hi! I'm finally home after a long day shift. My feet are killing me and I barely "
    "had time to eat. How are you doing this evening?",
    "It was one of those days where every patient needed something at the same time. "
    "We had two admissions right before handover, and the new colleague left early again.",
    "I don't know how to bring it up with him without sounding bossy. He's nice, but it "
    "means I end up doing his charting. Do you think I should talk to him or the charge nurse?",
    "You're right that talking to him first is fairer. Maybe tomorrow at lunch, when it's "
    "quiet. I'll say it's about patient safety, not about him being lazy.",
    "On a brighter note, Miso was waiting at the door when I came in. She's so clingy when "
    "I've been away all day. I think she'd really like a friend.",
    "Jonas is still a bit unsure about a second cat. He worries Miso will be jealous and "
    "that the flat is too small. I see his point, to be honest.",
    "Maybe we wait until we have the house with the garden. That feels more sensible, even "
    "if I keep looking at the shelter's website every night.",
    "I also called my mum on the way home. The application for home care is moving, but "
    "slowly. The municipality wants more papers from her doctor.",
    "She pretends she's fine, but I could hear she's tired. It's hard being an hour away "
    "when she needs help with small things like shopping.",
    "Anders says I should stop feeling guilty, but he's in Berlin, so it's easy for him to "
    "say. We'll talk about it properly on Sunday.",
    "Anyway, I went for a short run this morning before work. Only five kilometres, but my "
    "legs felt heavy. The half-marathon is in six weeks and I'm nervous.",
    "My plan says a long run of fourteen kilometres this weekend. I'm not sure I can fit "
    "it in with the dinner for Jonas's parents on Saturday.",
    "Sunday morning could work, before the call with Anders. I'd have to go to bed early "
    "on Saturday, which means no wine with his parents, ha.",
    "Speaking of the dinner, I want to make a big dal and some naan, and maybe a mango "
    "dessert. His dad is a bit suspicious of vegetarian food, though.",
    "Good idea to add a paneer dish, it's filling and he likes cheese. I'll make the "
    "dal the day before, it tastes better anyway.",
    "I'm also behind on my ceramics. The bowls came out of the kiln lopsided and one "
    "cracked. The teacher says that's normal for a first set.",
    "It's funny, I'm much more patient with the clay than with myself at work. Maybe "
    "that's why I like it so much. Nobody's life depends on a bowl.",
    "I've been sleeping badly again, waking at four and thinking about the ward. The "
    "night shifts last week really threw me off.",
    "I tried reading before bed, the new Adler-Olsen, but it's too gripping. Maybe crime "
    "novels aren't the best idea when I want to sleep.",
    "Piano might be better, actually. Ten minutes of Satie and I feel calmer. Jonas says "
    "it helps him fall asleep too, though that might be an insult.",
    "We also talked about Portugal again. We've saved about half of what we need, and "
    "I'd love to see Lisbon and the coast in October.",
    "He wants surfing, I want pastries and museums. We'll probably do both and be "
    "exhausted, which is how our holidays usually go.",
    "Thanks for listening tonight. It helps to sort my thoughts out loud before they "
    "spin around at four in the morning.",
    "I'll talk to my colleague tomorrow and let you know how it went. Good night, and "
    "say hi to nobody, since you don't have a cat.",
)
REPLIES = (
    "That sounds like a really draining day — and on your feet the whole time. I'm glad "
    "you're home. Have you managed to eat something yet, or shall we start there?",
    "It makes sense that it's getting to you: it isn't just extra work, it's that you "
    "can't rely on the handover. What part of it weighs on you most tonight?",
    "I'd lean towards talking to him first, calmly and concretely, and only going to the "
    "charge nurse if nothing changes. Framing it around the patients keeps it fair.",
    "That sounds like a good plan, and a kind one. A quiet moment and a concrete example "
    "usually land better than a general complaint. I hope lunch is calm tomorrow.",
    "Miso sounds like she's been counting the minutes. Eleven years old and still waiting "
    "at the door — that's a lot of love in one grey cat.",
    "Those are fair worries, and it's good you can see both sides. Cats can take a while "
    "to accept each other, and space does matter for that.",
    "Waiting for the garden sounds sensible, and looking at the shelter's website is "
    "allowed in the meantime. It keeps the hope warm.",
    "I'm glad the application is moving, even slowly. Paperwork with the municipality "
    "always seems to need one more document. How did your mum sound?",
    "That's a hard kind of tired to hear on the phone. Being an hour away doesn't make "
    "you less of a good daughter — you're doing a lot from where you are.",
    "It's easier to say from Berlin, that's true. Sunday sounds like a good time to share "
    "the load with him a bit more, not just the feelings.",
    "Heavy legs after a day shift week are normal. Six weeks is still a good stretch of "
    "time. What does your plan look like for the weekend?",
    "A busy Saturday makes a long run tricky. Is there a morning that could work, or "
    "could you split the distance this once?",
    "Sunday morning sounds workable — and a sober dinner with the in-laws might even be "
    "a strategic advantage. You'll be the sharpest one at the table.",
    "Dal, naan and mango sounds lovely. For a suspicious dad, something rich like a paneer "
    "dish might win him over — it's hard to miss meat next to that.",
    "Making the dal a day ahead is wise; it gives you room on Saturday. It sounds like "
    "a generous, warm dinner.",
    "Lopsided first bowls are almost a rite of passage. A cracked one just means the clay "
    "taught you something. What would you like to try next time?",
    "That's a lovely way to put it. The clay lets you be a beginner, and there's a lot of "
    "rest in that after a day where everything matters.",
    "Waking at four with the ward in your head sounds exhausting. Night shifts can take "
    "a while to shake off. Is there anything that helped last time?",
    "Maybe save the thriller for a weekend afternoon. Something gentler at night could "
    "help your mind slow down.",
    "Ten minutes of Satie sounds like a perfect wind-down — and I'd take Jonas's comment "
    "as a compliment to your playing.",
    "Half way there already is great progress. Lisbon in October sounds wonderful: warm "
    "but not too hot, and lovely light by the sea.",
    "Surfing and pastries sounds like a balanced holiday to me. Exhausted and happy is "
    "not the worst way to come home.",
    "I'm glad it helped. Sorting things out loud is often what makes them smaller. I hope "
    "your thoughts stay quieter tonight.",
    "Good luck with the conversation tomorrow — I'd love to hear how it goes. Sleep well, "
    "and give Miso a scratch from me.",
)


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """The chat calls' input tokens of one turn."""

    turn: int
    input_tokens: int
    cache_write: int
    cache_read: int

    @property
    def total(self) -> int:
        """All input tokens, cached or not."""
        return self.input_tokens + self.cache_write + self.cache_read


class MovingClock:
    """The core's clock: starts at `START` and moves only when told."""

    def __init__(self) -> None:
        self.current = START

    def now(self) -> datetime:
        """The bench's current time."""
        return self.current


def respond(replies: list[str]) -> Any:
    """The fake model's answers: the next scripted reply for a conversation turn, a fact
    and a thread for each extraction (so memory changes mid-conversation, as it does),
    a short summary otherwise."""
    noted = list(NOTED)

    def answer(body: dict[str, Any]) -> Step:
        choice = body.get("tool_choice") or {}
        if choice.get("type") == "tool":
            return ToolUseReply(choice["name"], {"memories": _extracted(body, noted)})
        if body["model"] == CHAT_MODEL and replies:
            return TextReply(replies.pop(0))
        return TextReply("They talked about work, their mother, running and a dinner.")

    return answer


def _extracted(body: dict[str, Any], noted: list[tuple[str, str, str]]) -> list[Any]:
    """What an extraction notes: the next two items, with the person's first message
    in the prompt as evidence."""
    prompt = json.dumps(body["messages"])
    evidence = [int(found) for found in PERSON_MESSAGE.findall(prompt)[:1]]
    items = [noted.pop(0) for _ in range(2) if noted]
    return [
        {
            "content": content,
            "category": category,
            "tier": tier,
            "importance": 6,
            "confidence": 0.9,
            "evidence_message_ids": evidence,
        }
        for content, category, tier in items
    ]


async def seed(core: Core) -> None:
    """The person and what the companion already knows about them."""
    person = await core.store.ensure_person(
        platform="bench", platform_user_id="sofie", chat_id="c-sofie", display_name="Sofie"
    )
    await core.store.update_person(person.id, timezone="Europe/Copenhagen")
    for content, importance in CORE_FACTS:
        candidate = Candidate(content, "fact", "core", importance, 0.9)
        await core.memories.add(person.id, candidate, source="extracted", actor="extraction")
    for content in ACTIVE:
        candidate = Candidate(content, "thread", "active", 5, 0.9)
        await core.memories.add(person.id, candidate, source="extracted", actor="extraction")


async def converse() -> list[TurnUsage]:
    """Run the conversation; the chat calls' usage per turn."""
    clock = MovingClock()
    async with FakeAnthropicAPI(responder=respond(list(REPLIES))) as api:
        with tempfile.TemporaryDirectory() as data_dir:
            settings = Settings(
                data_dir=Path(data_dir),
                log_level="WARNING",
                anthropic_api_key="sk-ant-bench",  # type: ignore[arg-type]
                anthropic_base_url=api.base_url,
                chat_model=CHAT_MODEL,
                fast_model=FAST_MODEL,
                burst_window_seconds=0,
            )
            core = await build_core(settings, clock=clock)
            try:
                await seed(core)
                return await _turns(core, api, clock)
            finally:
                await core.aclose()


async def _turns(core: Core, api: FakeAnthropicAPI, clock: MovingClock) -> list[TurnUsage]:
    rows = []
    for turn, text in enumerate(MESSAGES, start=1):
        gap = GAPS[turn % len(GAPS)]
        clock.current += timedelta(seconds=gap)
        api.cache.advance(gap)
        seen = len(api.usages)
        await core.router.handle(
            IncomingMessage("bench", "sofie", text, chat_id="c-sofie", display_name="Sofie")
        )
        chat = [usage for model, usage in api.usages[seen:] if model == CHAT_MODEL]
        rows.append(
            TurnUsage(
                turn,
                sum(u["input_tokens"] for u in chat),
                sum(u["cache_creation_input_tokens"] for u in chat),
                sum(u["cache_read_input_tokens"] for u in chat),
            )
        )
        await core.background.drain()  # extraction and summaries, between turns
    return rows


def figures(rows: list[TurnUsage]) -> tuple[float, float]:
    """(cache read share, input cost ratio) over the measured turns."""
    measured = [r for r in rows if r.turn >= MEASURED_FROM]
    total = sum(r.total for r in measured)
    read = sum(r.cache_read for r in measured)
    cached_cost = sum(
        r.input_tokens + WRITE_PRICE * r.cache_write + READ_PRICE * r.cache_read for r in measured
    )
    return read / total, cached_cost / total


def main() -> None:
    """Print the per-turn table and the figures."""
    from bot.logs import configure_logging

    configure_logging("WARNING", "console")
    rows = asyncio.run(converse())
    print(f"prompt cache over a {len(rows)}-turn conversation, {CHAT_MODEL}, strict fake")
    print(" turn   input   write    read   total  read share")
    for r in rows:
        share = r.cache_read / r.total if r.total else 0.0
        print(
            f" {r.turn:4d} {r.input_tokens:7d} {r.cache_write:7d} {r.cache_read:7d} "
            f"{r.total:7d}  {share:10.2f}"
        )
    share, cost = figures(rows)
    print(f"turns {MEASURED_FROM}–{len(rows)}: targets read share >= 0.80, cost ratio <= 0.30")
    print(f"figure chat_cache_read_share {share:.3f} ratio")
    print(f"figure chat_input_cost_ratio {cost:.3f} ratio")


if __name__ == "__main__":
    main()
