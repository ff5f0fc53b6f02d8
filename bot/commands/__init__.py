"""Slash commands in the platform-neutral core: parsing, dispatch and the replies."""
