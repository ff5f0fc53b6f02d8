"""Benchmarks: each prints a report ending with `figure <name> <value> <unit>` lines."""
