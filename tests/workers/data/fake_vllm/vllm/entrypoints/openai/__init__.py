"""Stand-in for vllm.entrypoints.openai (tests only)."""
