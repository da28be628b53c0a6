"""Published vLLM start-up reports vs the engine's vLLM KV pool (`python -m benchmarks.gpu_published`)."""
