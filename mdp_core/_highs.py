"""HiGHS helpers shared by every LP in the core (one home for solver set-up and deadlines)."""

from __future__ import annotations

import os
import sys
import time

import highspy

__all__ = ["new_highs", "run_until"]


def _silence_banner() -> None:
    """Create the process's first ``Highs`` with the C-level stdout sent to /dev/null.

    highspy prints its banner ("Running HiGHS ...") from C++ to file descriptor 1 when the first ``Highs`` of
    a process is constructed, whatever ``output_flag`` says; later objects print nothing. Done once when the
    core is imported, so CLIs can keep stdout to their own lines (a ``--json`` record must be the last line).
    """
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no usable fd 1 (embedded interpreters): nothing to silence
        highspy.Highs()
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


_silence_banner()


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
