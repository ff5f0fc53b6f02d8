"""End-to-end tests share the root fixtures (`core`, `scripted_llm`, `clock`)."""
