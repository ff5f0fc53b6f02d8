"""Learning: what the conversation teaches about a person, decided in code.

It owns extraction and its prompt, reconciliation against what is known, the second-look
judge, each memory's tier and lifespan, the cue rules for endings and system claims, the
one session-summary pipeline (the running fold and the closing summary), the questions
put to the person when a new statement contradicts a memory they set, the affirmation rule
(`affirmation.py`) and the questions about unsure memories (`unsure.py`). It may import
`memory.store`, `memory.recall` and `memory.local_time`; never `memory.care`.
"""
