"""Prefect tasks: one per ArGen stage, a few lines each (retries, cache keys, names)."""
