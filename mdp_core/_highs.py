"""HiGHS helpers shared by every LP in the core (one home for solver set-up and deadlines)."""

from __future__ import annotations

import time

import highspy

__all__ = ["new_highs", "run_until"]


def new_highs(**options: bool | int | float | str) -> highspy.Highs:
    """A silent HiGHS instance with the given options set (``output_flag`` off)."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for name, value in options.items():
        h.setOptionValue(name, value)
    return h


def run_until(h: highspy.Highs, deadline: float) -> highspy.HighsModelStatus:
    """Run HiGHS until ``deadline`` (a ``time.perf_counter()`` value) at the latest; its model status.

    HiGHS compares ``time_limit`` with its run clock, which accumulates over ``run()`` calls on one object.
    """
    h.setOptionValue("time_limit", h.getRunTime() + max(deadline - time.perf_counter(), 1e-3))
    h.run()
    return h.getModelStatus()
