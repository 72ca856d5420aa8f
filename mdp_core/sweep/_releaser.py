"""Many releases of one table through one composed mechanism, drawn as :func:`mdp_core.sample` draws."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Releaser"]


class Releaser:
    """Privatises one code matrix many times with a :class:`mdp_core.ComposedMechanism`, drawing exactly
    what ``mech.privatize`` draws (:func:`mdp_core.sample`'s inverse-CDF algorithm: one ``rng.random(N)``
    per group, in group order, ``searchsorted(cdf[x], u, side="right")`` per input value), with the work
    that does not change between releases done once: the flat group codes and the records of each input
    value (per code matrix: :func:`mdp_core.sample` sorts the records on every call), the row CDFs (per
    mechanism)."""

    def __init__(
        self, x: np.ndarray, attributes: Sequence[str], groups: Sequence[Sequence[str]], sizes: Any
    ) -> None:
        index = {a: j for j, a in enumerate(attributes)}
        self.x = x
        self.cols = [[index[a] for a in g] for g in groups]
        self.sizes = [tuple(int(v) for v in s) for s in sizes]
        self.parts: list[list[tuple[int, np.ndarray]]] = []
        for cols, sz in zip(self.cols, self.sizes, strict=True):
            flat = np.ravel_multi_index(tuple(x[:, cols].T), sz)
            order = np.argsort(flat, kind="stable")
            values, starts = np.unique(flat[order], return_index=True)
            bounds = [*starts[1:], flat.size]
            self.parts.append(
                [(int(v), order[lo:hi]) for v, lo, hi in zip(values, starts, bounds, strict=True)]
            )
        self._cdfs: dict[int, list[np.ndarray]] = {}

    def _cdf(self, mech: Any) -> list[np.ndarray]:
        key = id(mech)  # the caller keeps every mechanism alive while releasing
        if key not in self._cdfs:
            cdfs = []
            for P in mech.channels:
                cdf = np.cumsum(np.asarray(P, dtype=np.float64), axis=1)
                cdf /= cdf[:, -1:]
                cdfs.append(cdf)
            self._cdfs[key] = cdfs
        return self._cdfs[key]

    def release(self, mech: Any, rng: np.random.Generator) -> np.ndarray:
        out = self.x.copy()
        n = self.x.shape[0]
        for cols, sizes, parts, cdf in zip(self.cols, self.sizes, self.parts, self._cdf(mech), strict=True):
            u = rng.random(n)
            y = np.empty(n, dtype=np.int64)
            for value, idx in parts:
                y[idx] = np.searchsorted(cdf[value], u[idx], side="right")  # type: ignore[index,call-overload]
            np.minimum(y, cdf.shape[1] - 1, out=y)
            out[:, cols] = np.stack(np.unravel_index(y, sizes), axis=1)
        return out
