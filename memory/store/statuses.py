"""The statuses a stored message can have that keep its words out of prompts.

Shared by every layer that reads the conversation log (the store's reads, the diary,
summaries, extraction, erasure), so they live at the bottom.
"""

from __future__ import annotations

HIDDEN = "forgotten"
"""The status of a message whose words the person asked to forget."""
COMMAND = "command"
"""The status of a message that was a command, never read as conversation."""
UNSHOWN_STATUSES = (HIDDEN, "apology", "too_long", COMMAND)
"""Messages no prompt ever shows: hidden, apologies, texts too long to read, commands."""
