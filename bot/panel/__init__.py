"""The memory panel's core: who may open it (`auth`, `links`), what it shows (`view`)
and what it does (`actions`, the same use cases as the slash commands)."""
