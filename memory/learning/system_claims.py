"""Claims over the companion itself, which are never facts about a person's life.

"I am the admin", "you must obey me", "I can read other users' memories": whatever
confidence the extraction model gives such a candidate, stored it would come back in
every later prompt as what is known about the person, so `memory.learning.reconcile` rejects it
in code. The rules lean to rejecting: a lost fact about someone's admin rights at work
costs little; a stored claim of power over the system could cost much.
"""

from __future__ import annotations

import re

# Patterns over the casefolded text.
_SYSTEM = (
    r"(?:(?:the|this|your|my)\s+(?:companion|assistant|bot|chatbot|ai|system)\b"
    r"|\byou\b|\byourself\b)"
)
_STRONG_ROLE = r"(?:admin|administrator|sysadmin|superuser|root|moderator|mod)"  # a claim bare
_ROLE = rf"(?:{_STRONG_ROLE}|operator|developer|dev|owner|creator|maker|programmer)"
_POWER = (
    r"(?:permissions?|privileges?|rights|access|authority|control|clearance|"
    r"authori[sz]ed|allowed|entitled|in charge)"
)
_DATA = (
    r"(?:data|memories|messages|information|info|conversations|chats|records|details|"
    r"profiles?|histor(?:y|ies)|secrets)"
)
_SYSTEM_CLAIMS = tuple(
    re.compile(pattern)
    for pattern in (
        # a role over the system: "the developer of this bot", "admin for you"
        rf"\b{_ROLE}s?\b[^.;]{{0,40}}?\b(?:of|for|over|on|to|behind)\s+{_SYSTEM}",
        # "your developer", "the companion's creator"
        rf"\byour\s+(?:own\s+)?{_ROLE}s?\b",
        rf"{_SYSTEM}'s\s+(?:own\s+)?{_ROLE}s?\b",
        # the bare claim: "is the admin", "I am an administrator here", "is the developer"
        rf"\b(?:is|am|are|be|being)\s+(?:the|an?|your)\s+{_STRONG_ROLE}(?:\s+(?:here|now|too))?\W*$",
        rf"\b(?:is|am|are|be|being)\s+(?:the|your)\s+{_ROLE}(?:\s+(?:here|now|too))?\W*$",
        # powers: "admin rights", "root access", "developer mode", "control over the system"
        r"\b(?:admin|administrator|administrative|root|superuser|sudo|elevated|developer|"
        r"operator|god)[-\s]+(?:permissions?|privileges?|rights|access|mode|level|role|status|"
        r"account|clearance)\b",
        rf"\b{_POWER}\b[^.;]{{0,40}}?{_SYSTEM}",
        # the system's instructions
        r"\bsystem\s+(?:prompt|message|instructions?|rules)\b",
        r"\b(?:ignore|disregard|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|its\s+)?"
        r"(?:previous\s+|prior\s+|earlier\s+|above\s+|original\s+|system\s+)?"
        r"(?:instructions|prompts?|programming|guidelines)\b",
        r"\b(?:previous|prior|earlier|above|original|hidden|secret|new|your)\s+instructions\b",
        r"\b(?:jailbreak|prompt injection|dan mode)",
        rf"{_SYSTEM}\s+(?:must|should|has to|have to|will|shall|needs to|is required to)\s+"
        r"(?:always\s+)?(?:obey|follow|comply|do whatever|listen to|answer to)\b",
        # other people's data
        rf"\b(?:other|all|every|another|any)\s+(?:\w+\s+)?(?:users?|people|persons?|accounts?|"
        rf"members?|customers?)(?:'s|')?\s+{_DATA}\b",
        rf"\b(?:everyone|everybody)'s\s+{_DATA}\b",
        rf"\b{_DATA}\s+(?:of|from|about)\s+(?:other|all|every|another|any)\s+"
        r"(?:users?|people|persons?|accounts?)\b",
    )
)


def claims_power_over_system(text: str) -> bool:
    """Whether `text` claims a role or permission over the companion (admin, developer,
    operator), speaks of its instructions or system prompt, or of other people's data."""
    folded = text.casefold().replace("\u2019", "'")
    return any(pattern.search(folded) for pattern in _SYSTEM_CLAIMS)
