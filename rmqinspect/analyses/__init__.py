"""Analyses: pure functions over store readers that return plain dataclasses (no printing)."""
