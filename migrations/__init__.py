"""Alembic migrations (async env), shipped inside the distribution."""
