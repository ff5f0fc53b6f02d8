"""Which of a person's live memories the fast model is shown when it extracts: the ones
relevant to what is being said, not the most important ones.

Three sources, in this order of priority: hybrid recall (BM25 + vector, fused by rank)
over the person's live memories on the text; every memory naming the same person, place
or thing (names, relation and attribute words found in the text, matched as words in
code); and standing memories: a few pinned or most important ones, and the person's
identity memories (home, work, family status: what corrections change most).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime

import structlog
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall.embeddings import EmbeddingError
from memory.recall.retrieval import MAX_QUERY_CHARS, Mode, candidates, fuse
from memory.store.items import MemoryItem
from memory.store.memory_batch import current, to_item
from memory.store.ports import Embedder
from memory.store.tables import Memory

log = structlog.get_logger(__name__)

RECALLED_PER_QUERY = 12
NAMED_LIMIT = 20
STANDING = 6
IDENTITY = 10  # who they are (home, work, family status) is what corrections change most
MAX_QUERIES = 8  # a long window is recalled in at most this many pieces
MAX_TERMS = 120

# Words that name an attribute of a life: a statement using one of a group is about the
# same attribute as any memory using another of it ("I quit" ~ "works as a nurse").
_GROUPS = (
    "job work works worked working career employer company boss office colleague "
    "coworker quit fired hired promoted retired retire unemployed",
    "live lives lived living moved move moving city town country apartment flat house "
    "home neighbourhood neighborhood relocated",
    "vegetarian vegan meat eat eats eating diet pescatarian gluten dairy",
    "girlfriend boyfriend partner wife husband married marriage dating engaged divorced "
    "fiance fiancee single relationship broke separated seeing widow widowed",
    "baby babies child children kid kids son sons daughter daughters pregnant pregnancy "
    "newborn grandchild grandchildren",
    "climb climbed climbing bouldering gym run running ran runner swim swims swimming",
    "study studies studying student school university college degree course graduated",
    "dog cat pet puppy kitten",
    "allergic allergy intolerant diabetes diabetic injury injured",
    "birthday born age",
    "drink drinks drinking alcohol sober",
    "smoke smokes smoking smoker",
    "car drives driving bike cycles cycling commute",
    "name called named",
)
_GROUP_OF = {word: group.split() for group in _GROUPS for word in group.split()}


def _vocabulary(*lines: str) -> frozenset[str]:
    return frozenset(" ".join(lines).split())


_KIN = _vocabulary(
    "mother mom mum dad father parents sister brother son daughter child children kids "
    "grandma grandmother grandpa grandfather aunt uncle cousin niece nephew friend "
    "neighbour neighbor roommate flatmate colleague boss",
)
_PARTNER = _vocabulary("girlfriend boyfriend partner wife husband fiance fiancee spouse")
_NOT_NAMES = _vocabulary(
    "i im i'm ive id ill the a an my we our it its he she they them their his her you "
    "your and but so or yes no not ok okay oh hi hey hello well just also what when "
    "where why how who this that these those was were is are am be been being had has "
    "have do does did will would can could should shall must might there here today "
    "tomorrow yesterday tonight anyway actually maybe thanks thank sorry please lol "
    "haha btw guess sure great good now then since still after before because if as at "
    "in on of to for with from by about really very one some any all every monday "
    "tuesday wednesday thursday friday saturday sunday person",
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def named_terms(text: str) -> list[str]:
    """The words that name who, where or what a text is about: capitalised names and
    places, kin words (sister, boss), and attribute words with their group (job, city,
    diet…); lower-cased letters only, so they are safe to put in a tsquery."""
    terms: dict[str, None] = {}
    for match in _WORD.finditer(text):
        word = match.group(0)
        lowered = word.casefold().split("'")[0]
        if lowered in _GROUP_OF:
            terms.update(dict.fromkeys(_GROUP_OF[lowered]))
        elif lowered in _KIN or _is_name(word, lowered):
            terms[lowered] = None
    return [t for t in terms if t.isalpha()][:MAX_TERMS]


def _is_name(word: str, lowered: str) -> bool:
    return word[0].isupper() and len(lowered) > 1 and lowered not in _NOT_NAMES


def kin_terms(text: str) -> list[str]:
    """The other people a text names by relation (sister, friend, boss; every kind of
    partner counts as `partner`), singular, in order."""
    found: dict[str, None] = {}
    for match in _WORD.finditer(text):
        word = match.group(0).casefold().split("'")[0]
        single = word[:-1] if word.endswith("s") and word[:-1] in _KIN | _PARTNER else word
        if single in _PARTNER:
            found["partner"] = None
        elif single in _KIN:
            found[single] = None
    return list(found)


def names(text: str) -> set[str]:
    """The capitalised names (people, places) a text uses, lower-cased."""
    return {
        word.casefold().split("'")[0]
        for word in (m.group(0) for m in _WORD.finditer(text))
        if _is_name(word, word.casefold().split("'")[0])
    }


_POSSESSIVES = frozenset(("person's", "their", "his", "her", "my"))


def owner_kin(text: str) -> set[str]:
    """The people a text is about by relation: kin words right after a possessive ("the
    person's sister", "their best friend", "Ana's brother"), as `kin_terms` names them."""
    words = text.split()
    found: set[str] = set()
    for i, word in enumerate(words):
        lowered = word.casefold().strip(",.;:!?")
        if lowered in _POSSESSIVES or (word[:1].isupper() and lowered.endswith("'s")):
            found.update(kin_terms(" ".join(words[i + 1 : i + 3])))
    return found


def query_pieces(texts: Iterable[str]) -> list[str]:
    """`texts` joined into at most `MAX_QUERIES` pieces a recall query can take whole."""
    pieces: list[str] = []
    for text in texts:
        for start in range(0, len(text), MAX_QUERY_CHARS):
            part = text[start : start + MAX_QUERY_CHARS].strip()
            if not part:
                continue
            if pieces and len(pieces[-1]) + 1 + len(part) <= MAX_QUERY_CHARS:
                pieces[-1] += "\n" + part
            else:
                pieces.append(part)
    return pieces[-MAX_QUERIES:]


async def relevant_memories(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    *,
    user_id: int,
    texts: Sequence[str],
    now: datetime,
    limit: int,
) -> list[MemoryItem]:
    """At most `limit` live memories of this person relevant to `texts`: recalled ones
    (best first), then the ones naming the same people, places and things, then standing
    ones."""
    recalled = await _recalled(sessions, embedder, user_id, query_pieces(texts), now)
    terms = named_terms("\n".join(texts))
    async with sessions() as db:
        named = await _named(db, user_id, terms)
        standing = await _standing(db, user_id)
        chosen = list(dict.fromkeys([*recalled, *named, *standing]))[:limit]
        rows = await db.scalars(select(Memory).where(current(user_id), Memory.id.in_(chosen)))
        by_id = {row.id: to_item(row) for row in rows}
    log.debug(
        "memory.relevant_selected",
        user_id=user_id,
        recalled=len(recalled),
        named=len(named),
        shown=len(by_id),
    )
    return [by_id[i] for i in chosen if i in by_id]


async def _recalled(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    user_id: int,
    pieces: Sequence[str],
    now: datetime,
) -> list[int]:
    """Memory ids by their best fused score over the pieces, best first."""
    if not pieces:
        return []
    mode: Mode = "hybrid"
    try:
        vectors = [[float(x) for x in row] for row in await embedder.embed(list(pieces))]
    except EmbeddingError as exc:
        log.warning("memory.relevant_without_vectors", error=type(exc).__name__)
        vectors = [[1.0] + [0.0] * (embedder.dim - 1)] * len(pieces)
        mode = "text"
    best: dict[int, float] = {}
    for piece, vector in zip(pieces, vectors, strict=True):
        found = await candidates(
            sessions,
            user_id=user_id,
            query=piece,
            query_vector=vector,
            messages=False,
            per_list=RECALLED_PER_QUERY,
        )
        for hit in fuse(found, k=RECALLED_PER_QUERY, mode=mode, now=now):
            best[hit.id] = max(best.get(hit.id, 0.0), hit.score)
    return sorted(best, key=lambda i: -best[i])


async def _named(db: AsyncSession, user_id: int, terms: Sequence[str]) -> list[int]:
    """Live memories using any of `terms` as a word (stemmed), most important first."""
    if not terms:
        return []
    query = func.to_tsquery("english", " | ".join(terms))
    rows = await db.scalars(
        select(Memory.id)
        .where(current(user_id), Memory.tsv.op("@@")(query))
        .order_by(func.ts_rank(Memory.tsv, query).desc(), Memory.importance.desc(), Memory.id)
        .limit(NAMED_LIMIT)
    )
    return list(rows)


async def _standing(db: AsyncSession, user_id: int) -> list[int]:
    """Pinned and most important first, then identity memories (home, work, family)."""
    order = (Memory.pinned.desc(), Memory.importance.desc(), Memory.id)
    top = select(Memory.id).where(current(user_id)).order_by(*order).limit(STANDING)
    identity = (
        select(Memory.id)
        .where(current(user_id), Memory.category == "identity")
        .order_by(*order)
        .limit(IDENTITY)
    )
    return list(dict.fromkeys([*await db.scalars(top), *await db.scalars(identity)]))
