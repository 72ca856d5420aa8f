"""Block inversion without the GIL: the same inverses as numpy, on one thread or several, and the failing
block named when one is not positive definite."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mdp_core.geo import _lapack
from mdp_core.geo._lapack import invert_spd_blocks, over_blocks, product_by_parts, row_parts, worker_count


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


@pytest.mark.parametrize("workers", [1, 2])
def test_float32_blocks_are_inverted_in_float32(workers: int) -> None:
    blocks = spd_blocks(5, 40, seed=workers)
    expected = np.linalg.inv(blocks)
    single = blocks.astype(np.float32)
    assert invert_spd_blocks(single, workers=workers) is None
    assert single.dtype == np.float32
    # float32's own accuracy (well conditioned blocks): far from float64's, far better than no inverse
    np.testing.assert_allclose(single, expected, rtol=0, atol=1e-6 * np.abs(expected).max())
    assert np.abs(single - expected).max() > 1e-12 * np.abs(expected).max()
    np.testing.assert_array_equal(single, single.transpose(0, 2, 1))


@pytest.mark.parametrize("single", [False, True])
def test_the_serial_fallback_inverts_both_precisions(monkeypatch: pytest.MonkeyPatch, single: bool) -> None:
    blocks = spd_blocks(3, 8, seed=5).astype(np.float32 if single else np.float64)
    expected = np.linalg.inv(blocks.astype(np.float64))
    monkeypatch.setattr(_lapack, "_SPOTRF" if single else "_POTRF", None)
    assert invert_spd_blocks(blocks) is None
    tol = 1e-6 if single else 1e-13
    np.testing.assert_allclose(blocks, expected, rtol=0, atol=tol * np.abs(expected).max())


@pytest.mark.parametrize("n", [1, 5, _lapack._TILE, _lapack._TILE + 1, 2 * _lapack._TILE + 37])
def test_the_upper_triangle_is_mirrored_tile_by_tile(n: int) -> None:
    block = np.random.default_rng(n).standard_normal((n, n))
    expected = np.triu(block) + np.triu(block, 1).T  # the lower triangle's old values must all go
    _lapack._upper_to_lower(block)
    np.testing.assert_array_equal(block, expected)


@pytest.mark.parametrize("count", [1, 2, 3, 40])
def test_a_product_by_row_parts_equals_the_whole_product(count: int) -> None:
    matrix = sp.random(37, 23, density=0.2, format="csr", random_state=count)
    v = np.random.default_rng(count).standard_normal(23)
    parts = row_parts(matrix, count)
    sizes = [part.shape[0] for _, part in parts]
    assert len(parts) == count and [first for first, _ in parts] == np.cumsum([0, *sizes[:-1]]).tolist()
    np.testing.assert_allclose(product_by_parts(parts, v, 37), matrix @ v, rtol=1e-15, atol=1e-15)


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
    with pytest.raises(ValueError, match="C-contiguous float64 or float32"):
        invert_spd_blocks(spd_blocks(2, 3, seed=0).transpose(0, 2, 1)[:, ::2])
    with pytest.raises(ValueError, match="C-contiguous float64 or float32"):
        invert_spd_blocks(spd_blocks(2, 3, seed=0).astype(np.float16))
    assert 1 <= worker_count() <= 8
    assert _lapack._capsule_routine("no_such_routine") is None  # then the serial f2py path is used
