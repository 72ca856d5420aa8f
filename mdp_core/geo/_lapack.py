"""Inverting many small SPD matrices on every core: LAPACK called without the GIL.

scipy's f2py wrappers (``scipy.linalg.lapack``) hold the GIL, so threads over the blocks of
:mod:`mdp_core.geo.ipm` ran no faster. The same LAPACK routines are exported by
``scipy.linalg.cython_lapack`` as C function pointers (PyCapsules, the way numba calls them); ctypes
releases the GIL for the duration of a foreign call, so a thread pool over the blocks runs them in
parallel. Measured: 117 blocks of 406 x 406, potrf + potri and the copy of the triangle, 0.20 s on two
threads (0.28 s with an indexed copy of the triangle, 0.53 s on one thread).
When the capsules are not usable the serial f2py path is used instead (same results). The same threads
multiply a sparse matrix cut into row parts (:func:`product_by_parts`).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

from mdp_core._cores import over_blocks, worker_count

__all__ = ["invert_spd_blocks", "over_blocks", "product_by_parts", "row_parts", "worker_count"]

_Routine = Callable[..., None]


def _capsule_routine(name: str) -> _Routine | None:
    """``void name(char *uplo, int *n, real *a, int *lda, int *info)`` from scipy's cython_lapack, ``real``
    double for the ``d`` routines and float for the ``s`` ones."""
    try:
        from scipy.linalg import cython_lapack

        capsule = cython_lapack.__pyx_capi__[name]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        signature = get_name(capsule)
        address = get_pointer(capsule, signature)
    except (ImportError, AttributeError, KeyError, ValueError):
        return None
    if not signature.startswith(b"void (char *, int *,"):  # only the LP64 interface declared below
        return None
    int_p = ctypes.POINTER(ctypes.c_int)
    real_p = ctypes.POINTER(ctypes.c_double if name.startswith("d") else ctypes.c_float)
    prototype = ctypes.CFUNCTYPE(None, ctypes.c_char_p, int_p, real_p, int_p, int_p)
    return prototype(address)


_POTRF, _POTRI = _capsule_routine("dpotrf"), _capsule_routine("dpotri")
_SPOTRF, _SPOTRI = _capsule_routine("spotrf"), _capsule_routine("spotri")
#: Tile side of :func:`_upper_to_lower` (1,251 x 1,251: 64 1.9 ms, 128 1.6, 256 1.3, one tile 2.9).
_TILE = 256


def _capsules(dtype: np.dtype) -> tuple[_Routine | None, _Routine | None]:
    """potrf and potri through the capsules for blocks of ``dtype`` (float32 or float64)."""
    return (_SPOTRF, _SPOTRI) if dtype == np.float32 else (_POTRF, _POTRI)


def _invert_serial_capsule(blocks: np.ndarray) -> int | None:
    """Invert C-contiguous symmetric blocks in place through the capsules (GIL released per call)."""
    potrf, potri = _capsules(blocks.dtype)
    assert potrf is not None and potri is not None
    real = ctypes.c_float if blocks.dtype == np.float32 else ctypes.c_double
    n = blocks.shape[1]
    size, info = ctypes.c_int(n), ctypes.c_int(0)
    for k in range(len(blocks)):
        block = blocks[k]
        data = block.ctypes.data_as(ctypes.POINTER(real))
        # column-major "L" of a C-ordered symmetric matrix is its upper triangle
        potrf(b"L", ctypes.byref(size), data, ctypes.byref(size), ctypes.byref(info))
        if info.value == 0:
            potri(b"L", ctypes.byref(size), data, ctypes.byref(size), ctypes.byref(info))
        if info.value != 0:
            return k
        _upper_to_lower(block)
    return None


def _upper_to_lower(block: np.ndarray) -> None:
    """Complete a symmetric matrix of which only the upper triangle is set (potri sets one triangle).
    Tile by tile (the transposed reads stay in cache), each diagonal tile by a masked copy, not fancy
    indexing: 1.3 against 2.9 ms for one masked copy of the whole 1,251 x 1,251 block (23 s of the 605 s
    exact optimum at depth 2 of the city); at 406 x 406 the masked copy took 0.45 ms, fancy indexing 0.9."""
    n = block.shape[0]
    for i in range(0, n, _TILE):
        for j in range(0, i, _TILE):
            block[i : i + _TILE, j : j + _TILE] = block[j : j + _TILE, i : i + _TILE].T
        tile = block[i : i + _TILE, i : i + _TILE]
        np.copyto(tile, tile.T, where=_strictly_lower(tile.shape[0]))


@functools.lru_cache(maxsize=4)
def _strictly_lower(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool), -1)


def _invert_serial_f2py(blocks: np.ndarray) -> int | None:
    potrf, potri = lapack.get_lapack_funcs(("potrf", "potri"), dtype=blocks.dtype)
    for k in range(len(blocks)):
        factor, info = potrf(blocks[k], lower=1)
        if info == 0:
            inverse, info = potri(factor, lower=1, overwrite_c=1)
        if info != 0:
            return k
        blocks[k] = inverse.T  # potri fills the lower triangle only: the upper one of the transpose
        _upper_to_lower(blocks[k])
    return None


def invert_spd_blocks(blocks: np.ndarray, workers: int | None = None) -> int | None:
    """Replace every ``blocks[k]`` (symmetric positive definite) by its inverse: Cholesky, then potri.

    Parameters
    ----------
    blocks : ndarray, shape (m, n, n), C-contiguous float64 or float32
        Overwritten with the inverses (float32: half the time, for the early Newton systems of
        :mod:`~mdp_core.geo.ipm`).
    workers : int, optional
        Threads over the blocks (default :func:`worker_count`); BLAS inside should be on one thread.

    Returns
    -------
    int or None
        Index of a block that is not positive definite (the rest are then undefined), or None.
    """
    if not blocks.flags.c_contiguous or blocks.dtype not in (np.float64, np.float32):
        raise ValueError("blocks must be a C-contiguous float64 or float32 array")
    if None in _capsules(blocks.dtype):
        return _invert_serial_f2py(blocks)

    def invert(lo: int, hi: int) -> int | None:
        bad = _invert_serial_capsule(blocks[lo:hi])
        return None if bad is None else lo + bad

    return next((bad for bad in over_blocks(len(blocks), invert, workers) if bad is not None), None)


def row_parts(matrix: sp.csr_matrix, count: int) -> list[tuple[int, sp.csr_matrix]]:
    """``matrix`` cut into ``count`` slices of consecutive rows, each with its first row's index."""
    bounds = np.linspace(0, matrix.shape[0], max(1, count) + 1).astype(int)
    return [(lo, matrix[lo:hi]) for lo, hi in itertools.pairwise(bounds.tolist())]


def product_by_parts(parts: list[tuple[int, sp.csr_matrix]], v: np.ndarray, rows: int) -> np.ndarray:
    """``matrix @ v`` from its :func:`row_parts`, one part per thread (sparse products release the GIL).
    The geo LP's transpose of 7 M rows: 26 against 50 ms on 2 cores; its rows themselves (a product as long as
    the rows) did not gain, and are multiplied whole."""
    out = np.empty(rows)

    def multiply(lo: int, hi: int) -> None:
        for first, part in parts[lo:hi]:
            out[first : first + part.shape[0]] = part @ v

    over_blocks(len(parts), multiply)
    return out
