"""The markers of the block of remembered things a turn's prompt carries.

Recall writes the block between them; learning strips it from the words it reads, so a
memory shown to the model is never learned again as if the person had said it.
"""

from __future__ import annotations

MEMORY_BLOCK_START = "<memory>"
MEMORY_BLOCK_END = "</memory>"
