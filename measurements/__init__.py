"""Acceptance jobs, their measurements and calibration (the measured half of every recommendation).

The calibration math will live in a pure module here (no Django), next to the models that store jobs.
"""
