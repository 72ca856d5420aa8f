"""HiGHS helpers shared by every LP in the core (one home for solver set-up and deadlines)."""

from __future__ import annotations

import os
import sys
import time

import highspy
import numpy as np
import scipy.sparse as sp

__all__ = ["highs_model", "new_highs", "row_sums_master", "run_until"]


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


def row_sums_master(n: int, **options: bool | int | float | str) -> highspy.Highs:
    """A master LP with no columns yet and ``n`` rows ``= 1`` (the row sums of a mechanism), primal and dual
    tolerances 1e-10 unless ``options`` set them."""
    h = new_highs(**{"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10, **options})
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = 0, n
    lp.row_lower_ = lp.row_upper_ = np.ones(n)
    h.passModel(lp)
    return h


_NO_ITERATION_LIMIT = 2**31 - 1  # HiGHS's default simplex_iteration_limit (kHighsIInf)


def run_until(
    h: highspy.Highs, deadline: float, max_primal_iterations: int | None = None
) -> highspy.HighsModelStatus:
    """Run HiGHS until ``deadline`` (a ``time.perf_counter()`` value) at the latest; its model status.

    HiGHS compares ``time_limit`` with its run clock, which accumulates over ``run()`` calls on one object.
    With ``max_primal_iterations``, a primal simplex run past that many iterations (a stalled, degenerate
    LP) goes back to the basis it started from and runs the dual simplex instead.
    """
    start = h.getBasis() if max_primal_iterations else None
    if max_primal_iterations:
        h.setOptionValue("simplex_iteration_limit", max_primal_iterations)
    h.setOptionValue("time_limit", h.getRunTime() + max(deadline - time.perf_counter(), 1e-3))
    try:
        h.run()
    finally:
        if start is not None:
            h.setOptionValue("simplex_iteration_limit", _NO_ITERATION_LIMIT)
    status = h.getModelStatus()
    if start is not None and status == highspy.HighsModelStatus.kIterationLimit:
        h.setBasis(start)
        h.setOptionValue("simplex_strategy", 1)  # dual
        return run_until(h, deadline)
    return status


def highs_model(
    a: sp.spmatrix,
    lower: np.ndarray,
    upper: np.ndarray,
    cost: np.ndarray,
    **options: bool | int | float | str,
) -> highspy.Highs:
    """A HiGHS model for min cost'x, lower <= A x <= upper, x >= 0 (column-wise matrix)."""
    h = new_highs(**options)
    a = sp.csc_matrix(a)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = a.shape[1], a.shape[0]
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = np.zeros(a.shape[1])
    lp.col_upper_ = np.full(a.shape[1], highspy.kHighsInf)
    lp.row_lower_ = np.asarray(lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr
    lp.a_matrix_.index_ = a.indices
    lp.a_matrix_.value_ = a.data
    h.passModel(lp)
    return h
