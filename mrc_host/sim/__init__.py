"""Deterministic fabric simulator that runs the real MRC core."""
