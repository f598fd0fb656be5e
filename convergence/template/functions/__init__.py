"""Intrinsic functions, grouped by family; ``versions`` arranges them into per-version tables."""
