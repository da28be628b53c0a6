"""Recommendations: which configurations run a workload, how fast, at what cost, on what evidence."""
