"""The Newton system of :mod:`mdp_core.geo.ipm`: the rows' structure, and its block factorisation.

In a primal-dual Newton step of the geo LP the matrix ``G' D G + W / P`` is block diagonal, one n x n block
per output, and the row sums leave an n x n Schur complement ``S = sum_y H_y^-1``: m Cholesky factorisations
and inverses of n x n matrices per iteration, on all cores (:mod:`mdp_core.geo._lapack`: 0.13 s for 117
blocks of 406 at depth 1 of the 15 km city on 2 cores, 0.34 s on one). The blocks go into one buffer reused
by every iteration; the memory-bound products with their inverses run on all cores too
(:func:`~mdp_core.geo._lapack.over_blocks`: the exact optimum at depth 1 of the city, eps 1.5, back to back,
in 51.4 s against 57.8 s on one thread).

**Mixed precision.** While the blocks are well conditioned (early on the path) they are inverted in float32
(half the time: 117 blocks of 1,251, 1.40 against 2.72 s on 2 cores) and the step is refined in float64
(:meth:`Newton.solve`) to float64's accuracy; the interior point goes over to float64 for good once a
refined step's residual stays above :data:`~mdp_core.geo.ipm._SINGLE_RESIDUAL` or a float32 block is not
definite. Until then its iterates are those of float64 (the same duality gaps to 2 digits).

**Shifts.** At the end of the path a float64 block can fail its Cholesky factorisation in floating point
(the rows' weights ``lam / s`` span many orders): the blocks are then factorised with their diagonals
times ``1 + shift`` (:data:`_SHIFTS`), and the refinement solves the unshifted system. City depth 2,
eps 3.47 (the Low level), round 2: without, the interior point stopped at iteration 66 (gap 5.5e-7, 7.6e-6
above its certificate, so the optimum stayed unproven); with a shift of 1e-12 it converged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg import cho_factor, cho_solve

from mdp_core.geo._lapack import invert_spd_blocks, over_blocks, product_by_parts, row_parts, worker_count

__all__ = ["Newton", "Structure", "factorise"]

#: Iterative refinement of the Newton systems: at most this many steps, until this relative residual.
_REFINE_STEPS, _REFINE_TOL = 4, 1e-10
#: Relative diagonal shifts tried in turn when a float64 block (or the Schur complement) is not definite in
#: floating point, late on the path. The refinement solves the unshifted system. City depth 2, eps 3.47:
#: without them the interior point stopped at a gap of 5.5e-7, 7.6e-6 above its certificate.
_SHIFTS = (1e-12, 1e-10, 1e-8)


@dataclass
class Structure:
    """Index arrays of the rows in the variables and in the stacked Hessian blocks (built once)."""

    n: int
    m: int
    ra: np.ndarray  # scaled coefficients: row = ra P[a, y] - rb P[b, y]
    rows: sp.csr_matrix  # the scaled rows over the variables (x = a m + y), and their transpose: CSR
    column_parts: list[tuple[int, sp.csr_matrix]]  # the transpose by rows (beats gathers by 20-25 %)
    # G'DG in the (m, n, n) stack: its distinct entries ``positions`` are ``assemble @ d`` (the four terms
    # of every row summed once, by a sparse product), the W/P diagonal goes to ``diagonal``
    positions: np.ndarray
    assemble: sp.csr_matrix
    diagonal: np.ndarray

    @classmethod
    def build(cls, n: int, m: int, rows: np.ndarray, ratios: np.ndarray) -> Structure:
        a, b, y = rows[:, 0], rows[:, 1], rows[:, 2]
        norm = np.sqrt(1.0 + ratios * ratios)
        ra, rb = 1.0 / norm, ratios / norm
        block = y * n * n
        diagonal, across = [block + a * (n + 1), block + b * (n + 1)], [block + a * n + b, block + b * n + a]
        index = np.concatenate(diagonal + across)
        positions, slot = np.unique(index, return_inverse=True)
        r = len(rows)
        terms = np.concatenate([ra * ra, rb * rb, -ra * rb, -ra * rb])
        assemble = sp.csr_matrix((terms, (slot, np.tile(np.arange(r), 4))), shape=(len(positions), r))
        x = np.arange(n * m)
        matrix = sp.csr_matrix(
            (np.concatenate([ra, -rb]), (np.tile(np.arange(r), 2), np.concatenate([a * m + y, b * m + y]))),
            shape=(r, n * m),
        )
        return cls(
            n=n,
            m=m,
            ra=ra,
            rows=matrix,
            column_parts=row_parts(matrix.T.tocsr(), worker_count()),
            positions=positions,
            assemble=assemble,
            diagonal=(x % m) * n * n + (x // m) * (n + 1),
        )

    def hessian_blocks(self, d: np.ndarray, diag: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``G' diag(d) G + diag(diag)`` as m blocks of n x n, written into ``out`` (reused: a fresh
        154 MB array per iteration costs its page faults, ~0.1 s here)."""
        over_blocks(self.m, lambda lo, hi: out[lo:hi].fill(0.0))
        flat = out.reshape(-1)
        flat[self.positions] = self.assemble @ d
        flat[self.diagonal] += diag
        return out

    def g(self, v: np.ndarray) -> np.ndarray:
        """The scaled rows applied to a variable vector."""
        return self.rows @ v

    def gt(self, u: np.ndarray) -> np.ndarray:
        """The scaled rows' transpose applied to a row vector."""
        return product_by_parts(self.column_parts, u, self.n * self.m)

    def row_sums(self, v: np.ndarray) -> np.ndarray:
        return v.reshape(self.n, self.m).sum(axis=1)


class Newton:
    """The factorised Newton system of one iteration (blocks and Schur complement)."""

    def __init__(
        self, st: Structure, d: np.ndarray, diag: np.ndarray, buffer: np.ndarray, *, shift: float = 0.0
    ) -> None:
        """Factorise in the precision of ``buffer``: float32 halves the inversions and the products with
        the inverses, and iterative refinement (in float64) recovers the digits while the blocks are well
        conditioned (module docstring). ``shift`` > 0 factorises the blocks with their diagonals times
        ``1 + shift`` (a shift by ``shift`` of the matrix scaled to a unit diagonal; the Schur complement
        alike) instead: the refinement solves the unshifted system."""
        blocks = st.hessian_blocks(d, diag, buffer)
        self.st, self.d, self.diag, self.shift = st, d, diag, shift
        if shift:
            blocks.reshape(-1)[st.diagonal] *= 1.0 + shift
        failed = invert_spd_blocks(blocks)  # explicit inverses: the Schur complement needs them
        if failed is not None:
            raise np.linalg.LinAlgError(f"block {failed} is not positive definite")
        self.inverse = blocks
        schur = blocks.sum(axis=0, dtype=np.float64)
        if shift:
            schur[np.diag_indices_from(schur)] *= 1.0 + shift
        self.schur = cho_factor(schur)
        self.residual = 0.0  # relative residual of the last refined solve, where its refinement stopped

    def _blocks_solve(self, rhs: np.ndarray) -> np.ndarray:
        """H^-1 rhs for rhs of shape (n*m,), every block against its own column (m, n)."""
        cols = rhs.reshape(self.st.n, self.st.m).T.astype(self.inverse.dtype)[:, :, None]  # (m, n, 1)
        out = np.empty_like(cols)
        over_blocks(self.st.m, lambda lo, hi: np.matmul(self.inverse[lo:hi], cols[lo:hi], out=out[lo:hi]))
        return out[:, :, 0].astype(np.float64, copy=False)

    def _same_solve(self, dy: np.ndarray) -> np.ndarray:
        """H^-1 applied to the same column ``dy`` in every block (m, n)."""
        n, dtype = self.st.n, self.inverse.dtype
        out, stacked, dy = np.empty((self.st.m, n), dtype), self.inverse.reshape(-1, n), dy.astype(dtype)
        over_blocks(self.st.m, lambda lo, hi: np.matmul(stacked[lo * n : hi * n], dy, out=out[lo:hi].ravel()))
        return out.astype(np.float64, copy=False)

    def _reduced(self, f: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        hf = self._blocks_solve(f)
        dy = cho_solve(self.schur, g - hf.sum(axis=0))
        return (hf + self._same_solve(dy)).T.ravel(), dy

    def solve(
        self,
        f: np.ndarray,
        g: np.ndarray,
        refine: bool = True,
        unrefined: tuple[np.ndarray, ...] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``H dx - A'dy = f, A dx = g``, refined (H applied through G) while the relative residual is above
        ``_REFINE_TOL`` and falls tenfold a step, at most ``_REFINE_STEPS`` times: late on the path the
        explicit inverses lose digits, and the certificate with them (200-target sub-city: 7.9e-6 below the
        objective after one step, 1.6e-6 after four; past 1e-11 the residual stalls). ``unrefined``: this
        system's unrefined solution, when computed before."""
        dx, dy = self._reduced(f, g) if unrefined is None else unrefined
        st = self.st
        size = float(np.abs(f).max()) + float(np.abs(g).max())
        last = np.inf
        for _ in range(_REFINE_STEPS if refine else 0):
            r1 = f - (st.gt(self.d * st.g(dx)) + self.diag * dx - np.repeat(dy, st.m))
            r2 = g - st.row_sums(dx)
            residual = (float(np.abs(r1).max()) + float(np.abs(r2).max())) / size
            self.residual = residual
            if residual <= _REFINE_TOL or residual > 0.1 * last:
                break
            last = residual
            ex, ey = self._reduced(r1, r2)
            dx, dy = dx + ex, dy + ey
        return dx, dy


def factorise(
    st: Structure, d: np.ndarray, diag: np.ndarray, buffer: np.ndarray, shift: float = 0.0
) -> Newton | None:
    """The Newton system factorised in the precision of ``buffer``, with the least shift of :data:`_SHIFTS`
    from ``shift`` on (the last iteration's: once the blocks needed one, the next ones do too) that makes
    float64 blocks definite; None when none does, or a float32 block is not (float64 must take over)."""
    tries = (0.0, *_SHIFTS) if buffer.dtype == np.float64 else (0.0,)
    for each in (t for t in tries if t >= shift):
        try:
            return Newton(st, d, diag, buffer, shift=each)
        except np.linalg.LinAlgError:
            continue
    return None
