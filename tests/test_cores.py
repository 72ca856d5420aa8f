"""Chunked element-wise work on every core: the same numbers as numpy's whole-vector expressions."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdp_core import _cores
from mdp_core._cores import chunk_min, chunk_sum, elementwise, on_this_thread, over_blocks


def _ratio_less(a: np.ndarray, b: np.ndarray, c: np.ndarray, shift: float) -> np.ndarray:
    return (-a - b * c) / (1.0 + c * c) - shift


@given(size=st.integers(0, 70), chunk=st.integers(1, 9), seed=st.integers(0, 2**16), shift=st.floats(-5, 5))
def test_chunks_give_numpys_numbers_at_any_length(size: int, chunk: int, seed: int, shift: float) -> None:
    a, b, c = np.random.default_rng(seed).normal(size=(3, size))
    expected = _ratio_less(a, b, c, shift)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_cores, "_CHUNK", chunk)  # many chunks, a ragged last one, more chunks than threads
        got = elementwise(_ratio_less, a, b, c, shift)
        low, total = chunk_min(_ratio_less, a, b, c, shift), chunk_sum(_ratio_less, a, b, c, shift)
    np.testing.assert_array_equal(got, expected)  # element by element: the very same operations
    assert low == (expected.min() if size else np.inf)
    assert total == pytest.approx(float(expected.sum()), rel=1e-12, abs=1e-12)


def test_a_long_vector_is_split_over_the_threads() -> None:
    size = 3 * _cores._CHUNK + 17
    a = np.arange(size, dtype=float)
    np.testing.assert_array_equal(elementwise(np.multiply, a, 2.0), 2.0 * a)
    assert chunk_min(np.subtract, a, 1.0) == -1.0
    assert chunk_sum(np.add, a, 0.0) == size * (size - 1) / 2


def test_on_this_thread_keeps_block_work_on_the_calling_thread_and_ends_with_its_context() -> None:
    def where(lo: int, hi: int) -> tuple[int, int, int]:
        return lo, hi, threading.get_ident()

    with on_this_thread():
        inline = over_blocks(10, where, workers=4)
        values = elementwise(np.add, np.arange(4.0 * _cores._CHUNK), 1.0)
    assert inline == [(0, 10, threading.get_ident())]
    np.testing.assert_array_equal(values, np.arange(4.0 * _cores._CHUNK) + 1.0)
    spread = over_blocks(10, where, workers=2)
    assert [(lo, hi) for lo, hi, _ in spread] == [(0, 5), (5, 10)]
    assert spread[1][2] != threading.get_ident()  # the other chunk went to the pool's thread
