"""Recall: embeddings, retrieval and the context a turn is given.

It owns the embedders (offline by default: MiniLM, `minilm.py`), the record of which
embedder made the stored vectors, hybrid retrieval over messages, memories and session
summaries (with the time a question names, `when.py`, or an event, `anchor.py`, a second
hop over names, `entities.py`, and a spread over sessions for a question asking for
several things, `spread.py`), the memories an extraction is shown, the assembly of a
turn's context in a token budget (which memories stand in it and how recall marks the
rest: `life_cycle.py`), the markers of its memory block and the token estimate. It may import
`memory.store`, `memory.local_time` and `memory.person_words`; it never learns or forgets
anything.
"""
