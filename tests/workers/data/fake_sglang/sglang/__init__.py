"""A stand-in ``sglang`` package for testing workers.runner.programs.sglang_serve without a GPU (not SGLang)."""

__version__ = "0.0.0+fake"
