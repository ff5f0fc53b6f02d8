"""Everything stored about a person, in four sub-packages: `store` (the engine, the tables
and every SQL statement), `recall` (embeddings, retrieval, a turn's context), `learning`
(extraction, reconciliation, summaries, the diary) and `care` (forgetting, erasure, undo,
export, edits, lifespan). The bottom layer: it imports no other package of the project.
"""
