"""Benchmarks (not tests). ``python -m bench [NAME ...]`` prints a table per benchmark and writes JSON.

Each benchmark is a module ``bench/<name>.py`` with ``run(quick: bool = False) -> list[dict]``; every dict is
one table row (keys = columns). Numbers are seconds unless a column name says otherwise.
"""
