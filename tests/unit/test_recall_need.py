"""How much recall a message needs: none for acknowledgements and greetings, a few for a
continuation, more for a question about the past; in several languages."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.recall.need import CONTINUATION_K, PAST_K, USUAL_K, plan_recall

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "message",
    [
        "ok", "OK!", "okkk", "thanks", "Thank you so much!", "thaaanks 🙏", "hi", "hey there",
        "Good morning :)", "👍", "🙂🙂", "❤️", "lol", "hahaha", "yes", "ok thanks", "see you later!",
        "tak", "mange tak", "danke", "merci beaucoup", "gracias", "grazie mille", "спасибо",
        "bom dia", "hej",
    ],
)  # fmt: skip
def test_acknowledgements_and_greetings_skip_recall(message: str) -> None:
    plan = plan_recall(message, NOW)
    assert (plan.need, plan.k) == ("skip", 0)


@pytest.mark.parametrize(
    "message",
    [
        "do you remember my sister's name?", "Remember when we talked about Lisbon",
        "What did I say about the new job", "did I tell you about the dentist?",
        "we talked about this 3 weeks ago", "last summer was hard", "how was it in May?",
        "kan du huske hvad min søster hedder?", "Erinnerst du dich an meinen Hund?",
        "tu te souviens de mon frère ?", "¿te acuerdas de mi perro?", "ti ricordi di Anna?",
        "помнишь мою сестру?",
    ],
)  # fmt: skip
def test_questions_about_the_past_get_more_recall(message: str) -> None:
    plan = plan_recall(message, NOW)
    assert (plan.need, plan.k) == ("past", PAST_K)


@pytest.mark.parametrize(
    "message", ["and then she left", "but it was fine in the end", "so I said no", "og så gik hun"]
)
def test_a_continuation_gets_a_few_results(message: str) -> None:
    plan = plan_recall(message, NOW)
    assert (plan.need, plan.k) == ("continuation", CONTINUATION_K)


@pytest.mark.parametrize(
    "message",
    [
        "hi?", "ok?", "thanks, what should I cook tonight?", "ok 12",
        "My sister Anna is visiting from Berlin next week and I am nervous about it",
        "and then she told me she is moving to Berlin with her new partner next spring, "
        "which means I will be alone here with the dog and the flat",
        "I have an interview tomorrow",
    ],
)  # fmt: skip
def test_questions_and_news_are_never_skipped(message: str) -> None:
    plan = plan_recall(message, NOW)
    assert plan.need in ("usual", "past") and plan.k >= USUAL_K


def test_an_empty_message_needs_no_recall() -> None:
    assert plan_recall("   ", NOW).k == 0
