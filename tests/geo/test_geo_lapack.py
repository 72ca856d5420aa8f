"""Block inversion without the GIL: the same inverses as numpy, on one thread or several, and the failing
block named when one is not positive definite."""

from __future__ import annotations

import numpy as np
import pytest

from mdp_core.geo import _lapack
from mdp_core.geo._lapack import invert_spd_blocks, over_blocks, worker_count


def spd_blocks(m: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n, n))
    return a @ a.transpose(0, 2, 1) + n * np.eye(n)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_inverses_equal_numpys(workers: int) -> None:
    blocks = spd_blocks(7, 9, seed=workers)
    expected = np.linalg.inv(blocks)
    assert invert_spd_blocks(blocks, workers=workers) is None
    np.testing.assert_allclose(blocks, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(blocks, blocks.transpose(0, 2, 1))  # both triangles filled


@pytest.mark.parametrize(("count", "workers"), [(0, 2), (1, 3), (5, 1), (5, 2), (7, 3), (2, 8)])
def test_over_blocks_covers_every_block_once_in_order(count: int, workers: int) -> None:
    chunks = over_blocks(count, lambda lo, hi: (lo, hi), workers)
    assert len(chunks) == max(1, min(workers, count))
    assert [i for lo, hi in chunks for i in range(lo, hi)] == list(range(count))


def test_the_serial_fallback_gives_the_same_inverses(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = spd_blocks(4, 6, seed=0)
    expected = np.linalg.inv(blocks)
    monkeypatch.setattr(_lapack, "_POTRF", None)
    assert invert_spd_blocks(blocks) is None
    np.testing.assert_allclose(blocks, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_block_that_is_not_positive_definite_is_named(workers: int) -> None:
    blocks = spd_blocks(6, 5, seed=1)
    blocks[4] = -np.eye(5)
    assert invert_spd_blocks(blocks, workers=workers) == 4


def test_bad_layouts_are_refused_and_workers_are_counted() -> None:
    with pytest.raises(ValueError, match="C-contiguous float64"):
        invert_spd_blocks(spd_blocks(2, 3, seed=0).transpose(0, 2, 1)[:, ::2])
    with pytest.raises(ValueError, match="C-contiguous float64"):
        invert_spd_blocks(spd_blocks(2, 3, seed=0).astype(np.float32))
    assert 1 <= worker_count() <= 8
    assert _lapack._capsule_routine("no_such_routine") is None  # then the serial f2py path is used
