"""How much recall a message needs: none for a short acknowledgement or greeting ("ok",
"thanks", "hi", an emoji), a few results for a continuation ("and then she left"), the
usual number for anything else, and more for a question about the past ("do you
remember...", "what did I say about Lisbon?", "last summer").

Cheap rules on the words alone, in a few languages (English, Danish, German, French,
Spanish, Italian, Portuguese, Dutch, Swedish, Norwegian, Polish, Russian). A question is
never skipped: a wrong "skip" costs an answer, a wrong "recall" only a query.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memory.recall.when import time_window

Need = Literal["skip", "continuation", "usual", "past"]

SKIP_K = 0
CONTINUATION_K = 3
USUAL_K = 8
PAST_K = 14

MAX_ACK_WORDS = 4
MAX_CONTINUATION_WORDS = 12


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


ACKNOWLEDGEMENTS = _words(
    """
    ok okay okey k kk oki okie okidoki alright allright right sure yes yep yeah yup ya
    no nope nah fine cool nice great good perfect awesome wow lol lmao haha hahaha hehe
    ah oh ooh hmm hm mm mhm uh um true indeed exactly totally agreed agree noted gotcha
    understood thanks thank thx ty tysm cheers welcome np sorry please pls bye goodbye
    goodnight night gn later cya hi hey hello hiya yo morning evening afternoon sup
    you too same also there
    tak ja nej hej hejsa godmorgen godnat farvel okej jo
    danke bitte nein hallo moin tschüss servus genau gut
    merci oui non salut bonjour bonsoir coucou daccord
    gracias si sí hola vale adiós adios buenas claro
    grazie ciao sì certo buongiorno buonanotte
    obrigado obrigada olá ola sim não nao tchau
    dank bedankt doei hoi oke prima
    tack hejdå
    dzięki dzieki cześć czesc tak nie dobrze
    спасибо привет да нет ок хорошо пока ладно
    """
)
"""Words that, alone or with each other, only acknowledge or greet."""

ACK_PHRASES = (
    "thank you", "thanks a lot", "thank you so much", "good morning", "good night",
    "good evening", "see you", "see you later", "talk later", "sounds good", "got it",
    "all good", "makes sense", "no problem", "of course", "me too", "how are you",
    "mange tak", "god morgen", "godt nok", "vielen dank", "guten morgen", "gute nacht",
    "merci beaucoup", "bonne nuit", "de rien", "muchas gracias", "buenos días",
    "buenas noches", "de nada", "grazie mille", "muito obrigado", "bom dia", "boa noite",
)  # fmt: skip

_LONGEST_FIRST = sorted(ACK_PHRASES, key=len, reverse=True)

PAST_PATTERNS = (
    r"\b(do|did|can|could) you (still )?(remember|recall)\b",
    r"\bremember (when|that|what|how|who|where|the time|me telling)\b",
    r"\bwhat did (i|we) (say|tell|talk|mention|decide)\b",
    r"\bdid i (ever )?(tell|mention|say)\b",
    r"\b(have|had) i (ever )?(told|mentioned|said)\b",
    r"\bwhen did (i|we)\b",
    r"\b(last|that) time\b",
    r"\bwe (talked|spoke|discussed)\b",
    r"\bi (told|mentioned to) you\b",
    r"\bback (then|in|when)\b",
    r"\b\w+ (days?|weeks?|months?|years?) ago\b",
    r"\bhusker du\b", r"\bkan du huske\b", r"\bsidste gang\b",  # Danish
    r"\berinnerst du\b", r"\bweißt du noch\b", r"\bletztes mal\b",  # German
    r"\bte (souviens|rappelles)\b", r"\bla dernière fois\b",  # French
    r"\bte acuerdas\b", r"\brecuerdas\b", r"\bla última vez\b",  # Spanish
    r"\bti ricordi\b", r"\bricordi\b", r"\bl'ultima volta\b",  # Italian
    r"\bvocê lembra\b", r"\blembras\b", r"\bse lembra\b",  # Portuguese
    r"\bweet je nog\b", r"\bherinner je\b",  # Dutch
    r"\bminns du\b", r"\bhusker du\b",  # Swedish, Norwegian
    r"\bpamiętasz\b",  # Polish
    r"\bпомнишь\b", r"\bпомните\b", r"\bв прошлый раз\b",  # Russian
)  # fmt: skip
_PAST = re.compile("|".join(PAST_PATTERNS), re.IGNORECASE)

CONTINUATION_STARTS = _words(
    """
    and but so then also anyway plus because cause cuz which though well yeah yes no
    og men så også
    und aber dann also
    et mais puis donc alors
    y pero entonces luego
    e ma poi quindi allora
    en maar dan
    и но а потом
    """
)
"""A first word that carries on from what was just said."""

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)


@dataclass(frozen=True, slots=True)
class RecallPlan:
    """How much to recall for one message: `k` results (0 = no recall), and why."""

    need: Need
    k: int


def plan_recall(message: str, now: datetime | None = None) -> RecallPlan:
    """The recall a message needs (with `now`, a time it names counts as the past)."""
    text = " ".join(message.split())
    if not text:
        return RecallPlan("skip", SKIP_K)
    lowered = text.lower()
    if _PAST.search(lowered) or (now is not None and time_window(text, now) is not None):
        return RecallPlan("past", PAST_K)
    words = _WORD.findall(lowered.replace("’", "'"))
    if "?" in text:
        return RecallPlan("usual", USUAL_K)
    if is_acknowledgement(lowered, words):
        return RecallPlan("skip", SKIP_K)
    if len(words) <= MAX_CONTINUATION_WORDS and words and words[0] in CONTINUATION_STARTS:
        return RecallPlan("continuation", CONTINUATION_K)
    return RecallPlan("usual", USUAL_K)


def is_acknowledgement(lowered: str, words: list[str]) -> bool:
    """Only emoji, punctuation and a few words of thanks, assent or greeting."""
    if not words:
        return _only_symbols(lowered)
    if len(words) > MAX_ACK_WORDS:
        return False
    if any(ch.isdigit() for ch in lowered):
        return False
    joined = " ".join(words)
    for phrase in _LONGEST_FIRST:
        if joined == phrase or joined.startswith(phrase + " "):
            joined = joined[len(phrase) :].strip()
            break
    rest = [w.replace("'", "") for w in joined.split()]
    return all(_squeezed(w) in ACKNOWLEDGEMENTS for w in rest)


def _squeezed(word: str) -> str:
    """'thaaanks' -> 'thanks', 'okkk' -> 'ok', 'hahahaha' -> 'haha' (a stretched word)."""
    squeezed = re.sub(r"(.)\1{2,}", r"\1", word)
    if squeezed in ACKNOWLEDGEMENTS:
        return squeezed
    squeezed = re.sub(r"(.)\1+", r"\1", word)
    if squeezed in ACKNOWLEDGEMENTS:
        return squeezed
    if re.fullmatch(r"(ha|he|hi|ja)+h?", word):
        return "haha"
    return word


def _only_symbols(text: str) -> bool:
    """Emoji, punctuation and spaces only (and at least one of them; no digits)."""
    stripped = text.strip()
    return bool(stripped) and all(
        ch.isspace() or unicodedata.category(ch)[0] in ("S", "P", "M", "C") for ch in stripped
    )
