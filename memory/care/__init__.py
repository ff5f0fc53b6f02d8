"""Care: what a person may do with what is remembered about them, and how long it lives.

It owns forgetting (with the words a memory came from), erasure, undo, export, the person's
own edits, provenance, and each memory's tier and lifespan (the nightly patrol's
mechanical steps: decay, expiry, archiving, the trash purge). It may import `memory.store`
and `memory.recall`.
"""
