"""Learning: what the conversation teaches about a person, decided in code.

It owns extraction and its prompt, reconciliation against what is known, the second-look
judge, the cue rules for endings and system claims, session summaries, the diary, and the
questions put to the person when a new statement contradicts a memory they set, and
`person_words`: how a person's words go into any prompt as escaped data (pure text, used
by recall, `bot` and `scheduler` too). It may import `memory.store` and `memory.recall`.
"""
