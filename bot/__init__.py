"""The shared core: domain types, the conversation use case, prompting, the LLM client,
configuration, wiring and the command line."""
