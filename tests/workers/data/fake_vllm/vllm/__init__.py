"""A stand-in ``vllm`` package for testing workers.runner.programs.vllm_serve without a GPU (not vLLM)."""

__version__ = "0.0.0+fake"
