"""Loopback fakes of the outside world (platform APIs, the Messages API)."""
