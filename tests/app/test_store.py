"""ui.store: the one locked store of slow results."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ui.store import ResultStore


def test_store_computes_each_key_once_under_concurrency() -> None:
    store = ResultStore(capacity=2)
    calls: list[int] = []
    gate = threading.Event()

    def compute() -> int:
        gate.wait(5)
        calls.append(1)
        return 42

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(store.get_or_compute, "k", compute) for _ in range(8)]
        time.sleep(0.2)
        gate.set()
        assert [f.result() for f in futures] == [42] * 8
    assert len(calls) == 1
    store.get_or_compute("a", lambda: 1)
    store.get_or_compute("b", lambda: 2)  # capacity 2: "k" (least recently used) goes
    assert store.get("k") is None and store.get("a") == 1 and store.get("b") == 2


def test_store_evicts_the_least_recently_used() -> None:
    store = ResultStore(capacity=2)
    store["a"], store["b"] = 1, 2
    assert store.get("a") == 1  # "a" is now the most recent
    store["c"] = 3
    assert store.get("b") is None
    assert store.keys() == ["a", "c"]
