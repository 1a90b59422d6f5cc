"""Seasons benchmarks: ``python -m bench [--quick]`` (see bench/__main__.py)."""
