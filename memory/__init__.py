"""Everything stored about a person, in four sub-packages: `store` (the engine, the tables
and every SQL statement), `recall` (embeddings, retrieval, a turn's context), `learning`
(extraction, reconciliation, summaries, lifespans) and `care` (forgetting, erasure, undo,
export, edits); and `local_time`, the timezone arithmetic every layer shares. The bottom
layer: it imports no other package of the project. Inside, import-linter holds
`learning | care` above `recall` above `store`.
"""
