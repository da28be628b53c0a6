"""Per-mixer measurement scripts: the real transformers module under the profiler replay vs the engine formulas."""
