"""Benchmarks: each writes JSON (+ a PNG plot) under one results directory."""
