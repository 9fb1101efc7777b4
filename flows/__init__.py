"""Prefect flows: the ArGen pipeline, and training, evaluation and reporting on their own."""
