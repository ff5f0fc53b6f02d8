"""Proactive behaviour: APScheduler wiring and the jobs (check-ins, follow-ups, patrol,
diary, the delivery outbox)."""
