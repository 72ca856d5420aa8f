"""Exceptions shared by every mdp_core module."""

from __future__ import annotations

__all__ = ["DataError", "InfeasibleFloorError"]


class DataError(ValueError):
    """Bad input data or arguments; the message says what to fix."""


class InfeasibleFloorError(DataError):
    """A per-group budget floor that the composition rule does not allow at this eps.

    ``largest`` is the largest floor it allows there (``eps / K^(1/q)`` for K groups), so a sweep can skip
    such budgets and say why instead of failing.
    """

    def __init__(self, message: str, largest: float = float("nan")) -> None:
        super().__init__(message)
        self.largest = float(largest)

    def __reduce__(self) -> tuple[type[InfeasibleFloorError], tuple[str, float]]:
        return (type(self), (str(self), self.largest))  # keeps ``largest`` across processes (Dask)
