"""Care: what a person may do with what is remembered about them.

It owns forgetting (with the words a memory came from), erasure, undo, export, the person's
own edits, provenance, each memory's tier and lifespan (the nightly patrol's mechanical
steps: decay, expiry, archiving, the trash purge), and `SqlMemoryRepository` (the store's
memories with those operations). It may import `memory.store`, `memory.recall` and
`memory.local_time`; never `memory.learning`.
"""
