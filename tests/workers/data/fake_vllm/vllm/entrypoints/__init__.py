"""Stand-in for vllm.entrypoints (tests only)."""
