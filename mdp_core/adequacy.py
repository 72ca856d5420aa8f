"""Placeholder: filled in by its issue (see DESIGN.md)."""

from __future__ import annotations

__all__: list[str] = []
