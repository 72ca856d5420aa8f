"""The app's one locked store for slow results (the ones that carry a progress bar).

``st.cache_data`` replays the Streamlit elements a cached function created, so a progress bar drawn from
inside one fails on the next cache hit (ENGINEERING.md). Slow results are therefore computed in plain
functions that take the progress callback, and kept here under their own hashable key; the page draws
outside. The store is process-wide (shared by sessions, like ``st.cache_*``) and is also the ``cache=``
object the core takes (``mdp_core.run_dephdp(..., cache=store())``: ``get(key)`` and ``store[key] = value``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import streamlit as st

__all__ = ["ResultStore", "store"]


class ResultStore:
    """Process-wide LRU store of results keyed by hashable tuples, safe under concurrent sessions.

    One lock per key makes a second session wait for the first computation instead of repeating it.
    Keys start with a short tag naming their page or kind (``("mech", ...)``, ``("which", ...)``), so one
    store serves every page without collisions.
    """

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable) -> Any | None:
        """The stored value or None (marks it recently used)."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        return None

    def __setitem__(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                old, _ = self._items.popitem(last=False)
                self._key_locks.pop(old, None)

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[Hashable]:
        """The stored keys, least recently used first."""
        with self._lock:
            return list(self._items)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The stored value, computing it once (under a per-key lock) when missing."""
        hit = self.get(key)
        if hit is not None:
            return hit
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            hit = self.get(key)
            if hit is None:
                hit = compute()
                self[key] = hit
        return hit

    def clear(self) -> None:
        """Drop every stored value."""
        with self._lock:
            self._items.clear()
            self._key_locks.clear()


@st.cache_resource(show_spinner=False)
def store() -> ResultStore:
    """The one process-wide store of slow results of every page."""
    return ResultStore()
