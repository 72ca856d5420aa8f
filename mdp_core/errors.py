"""Exceptions shared by every mdp_core module."""

from __future__ import annotations

__all__ = ["DataError"]


class DataError(ValueError):
    """Bad input data or arguments; the message says what to fix."""
