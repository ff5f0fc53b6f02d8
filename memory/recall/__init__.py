"""Recall: embeddings, retrieval and the context a turn is given.

It owns the embedders (offline by default), the record of which embedder made the stored
vectors, hybrid retrieval over messages and memories, the memories an extraction is shown,
the assembly of a turn's context in a token budget, the markers of its memory block and
the token estimate. It may import `memory.store` and `memory.local_time`; it never learns
or forgets anything.
"""
