"""Helpers the tests run in child processes or share across modules (no tests here)."""
