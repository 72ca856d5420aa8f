"""Downstream tasks: the per-record discrepancy ``gamma_task(U(x), U(y))`` of 000 Eq. 16-18, and population
metrics for evaluation (000 Case III).

Every task statistic is *additive before a link*: ``U(x) = link(bias + sum_l E_l[x_l])`` with one table
``E_l`` (levels x dim) per attribute. This covers the four tasks below and makes the plug-in counterfactual
``U(y_k, x_-k)`` of Eq. 16 cheap: the contribution of the other attributes is computed once per context.

* ``"record"`` record fidelity: U embeds each attribute so that ``||U(x) - U(y)||^2 = sum_l d_l(x_l, y_l)^2``
  (numeric / ordinal: the normalised coordinate; nominal / binary: one-hot / sqrt 2). Radial.
* ``"mismatch"`` attribute mismatch (frequency estimation): the fraction of attributes that differ.
* ``"prediction"`` prediction preservation: ``U(x) = P(target = 1 | x)`` from an L2-regularised logistic
  regression on one-hot attributes, fitted on the given (fitting) codes; ``gamma = |U(x) - U(y)|``.
  Strongly non-radial.
* ``"threshold"`` threshold query: ``U(x) = 1[x_a >= t]`` for one attribute ``a``; ``gamma = |U(x) - U(y)|``.
* ``"entropy"`` entropy-based dependency preservation (000 Case III): ``U(x)_l = -ln p_l(x_l)``, the
  surprisal of each attribute value under the fitting marginals (add-1/2 smoothed), and
  ``gamma = sum_l |U_l(x) - U_l(y)|``. Why: to first order the plug-in entropy of attribute l moves by
  ``H(Y_l) - H(X_l) ~ (1/n) sum_i [s_l(y_il) - s_l(x_il)]`` (the gradient of ``-sum p ln p`` is
  ``-ln p - 1`` and the ``-1`` cancels), so the mean record loss bounds ``sum_l |Delta H_l|`` to first
  order. 000 leaves the per-record discrepancy of its entropy task open; this is our choice. Its task loss
  in evaluation is the population metric :func:`entropy_loss` (marginal entropies, joint entropy and
  total correlation), not the record mean.

The target column is never one of the released attributes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import minimize

from mdp_core.data import Encoded
from mdp_core.errors import DataError

__all__ = [
    "TASKS",
    "Task",
    "entropy_change",
    "entropy_loss",
    "make_task",
    "marginal_tv",
    "population_metrics",
    "positive_target",
    "release_attributes",
    "total_correlation_change",
]

TASKS: dict[str, str] = {
    "prediction": "Prediction preservation |f(x) - f(y)| (logistic model of the target)",
    "record": "Record fidelity: every attribute stays close (sum of squared distances per attribute)",
    "mismatch": "Attribute mismatch: fraction of attributes changed (frequency estimation)",
    "threshold": "Threshold query: whether an attribute is above a threshold stays the same",
    "entropy": "Entropy preservation: change of marginal / joint entropy and total correlation",
}


@dataclass(frozen=True, eq=False)
class Task:
    """A fitted task on ``attributes`` (code columns in this order).

    Attributes
    ----------
    name : str
        One of :data:`TASKS`.
    attributes : tuple of str
        Released attributes, the column order of every code array passed to the methods.
    tables : tuple of ndarray
        ``E_l``, shape (m_l, dim), per attribute.
    bias : float
        Added before the link.
    link : {"identity", "sigmoid"}
    gamma_kind : {"sq", "abs"}
        ``"sq"``: ``sum_j (u_j - v_j)^2``; ``"abs"``: ``sum_j |u_j - v_j|``.
    signature : str
        Stable identity (name, attributes, parameter fingerprint): part of cache keys.
    population : {"entropy", None}
        When set, the task is judged on the population (:meth:`evaluation_loss` is :func:`entropy_loss`);
        otherwise by the mean record loss.
    """

    name: str
    attributes: tuple[str, ...]
    tables: tuple[np.ndarray, ...]
    bias: float
    link: Literal["identity", "sigmoid"]
    gamma_kind: Literal["sq", "abs"]
    signature: str
    description: str = ""
    population: Literal["entropy"] | None = None

    def scores(self, codes: np.ndarray) -> np.ndarray:
        """Pre-link sums ``bias + sum_l E_l[x_l]``, shape (n, dim)."""
        arr = _codes_array(codes, len(self.attributes))
        sizes = np.array([len(table) for table in self.tables])
        if len(arr) and (arr.min() < 0 or np.any(arr.max(axis=0) >= sizes)):
            raise DataError(f"codes must lie in [0, domain size) per attribute, sizes {sizes.tolist()}")
        # one sparse one-hot product instead of a gather per attribute: 8 against 25 ms on 18,316 Adult
        # records x 14 attributes x 108 dimensions
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        one_hot = sparse.csr_array(
            (np.ones(arr.size), (arr + starts).ravel(), np.arange(0, arr.size + 1, arr.shape[1])),
            shape=(len(arr), int(sizes.sum())),
        )
        total = np.asarray(one_hot @ np.vstack(self.tables))
        total += self.bias
        return total

    def apply_link(self, s: np.ndarray) -> np.ndarray:
        """The link applied to pre-link sums (any shape)."""
        if self.link == "sigmoid":
            return 0.5 * (1.0 + np.tanh(0.5 * s))  # numerically stable logistic
        return s

    def utility(self, codes: np.ndarray) -> np.ndarray:
        """``U(x)`` per record, shape (n, dim)."""
        return self.apply_link(self.scores(codes))

    def gamma(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``gamma_task(u, v)`` over the last axis (broadcasting)."""
        diff = u - v
        if self.gamma_kind == "sq":
            return np.einsum("...j,...j->...", diff, diff)  # no squared temporary
        return np.sum(np.abs(diff), axis=-1)

    def loss(
        self, x_codes: np.ndarray, y_codes: np.ndarray, x_utility: np.ndarray | None = None
    ) -> np.ndarray:
        """Record-level loss ``c(y|x) = gamma(U(x), U(y))`` (000 Eq. 18), shape (n,); ``x_utility``:
        ``U(x)``, when computed before. Only the records that differ are embedded (the others lose 0)."""
        x = _codes_array(x_codes, len(self.attributes))
        y = _codes_array(y_codes, len(self.attributes))
        if x.shape != y.shape:
            raise DataError(f"x and y codes must have the same shape, got {x.shape} and {y.shape}")
        changed = np.flatnonzero((x != y).any(axis=1))
        ux = self.utility(x[changed]) if x_utility is None else x_utility[changed]
        out = np.zeros(len(x))
        out[changed] = self.gamma(ux, self.utility(y[changed]))
        return out

    def evaluation_loss(
        self, x_codes: np.ndarray, y_codes: np.ndarray, x_utility: np.ndarray | None = None
    ) -> float:
        """The task loss of a privatised table (000 Eq. 9 / Sec. IV-A): the mean record loss
        ``mean_i gamma(U(x_i), U(y_i))``, or for a population task its population metric; ``x_utility``
        as in :meth:`loss`."""
        if self.population == "entropy":
            return entropy_loss(x_codes, y_codes)
        return float(np.mean(self.loss(x_codes, y_codes, x_utility)))


def _codes_array(codes: object, width: int) -> np.ndarray:
    arr = np.asarray(codes.to_numpy() if isinstance(codes, pd.DataFrame) else codes)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise DataError(f"codes must have shape (n, {width}), got {arr.shape}")
    return arr.astype(np.int64, copy=False)


def release_attributes(encoded: Encoded) -> tuple[str, ...]:
    """The attributes DepHDP privatises: every column except the schema target."""
    return tuple(c for c in encoded.columns if c != encoded.schema.target)


def _fingerprint(*arrays: np.ndarray) -> str:
    h = hashlib.sha1()
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


def _coordinate(encoded: Encoded, col: str) -> np.ndarray:
    """Scalar coordinate whose absolute differences equal the component distance (ordinal / numeric)."""
    m = encoded.domain_sizes[col]
    kind = encoded.schema.kind(col)
    if kind == "numeric":
        c = np.asarray(encoded.levels[col], dtype=float)
        span = float(c.max() - c.min())
        return (c - c.min()) / span if span > 0 else np.zeros(m)
    return np.arange(m, dtype=float) / max(m - 1, 1)


def make_task(
    name: str,
    encoded: Encoded,
    *,
    attribute: str | None = None,
    threshold: float | None = None,
    ridge: float = 1.0,
) -> Task:
    """Build (and for ``"prediction"`` fit) a task on ``encoded`` (use the fitting split).

    Parameters
    ----------
    name : str
        ``"prediction"``, ``"record"``, ``"mismatch"`` or ``"threshold"``.
    encoded : Encoded
        The discretised fitting data; its schema target is excluded from the attributes.
    attribute, threshold : optional
        Threshold query: the attribute (default: the first numeric / ordinal one) and the threshold in
        its level units (default: the median level).
    ridge : float
        L2 penalty of the logistic regression (prediction task).
    """
    if not isinstance(encoded, Encoded):
        raise TypeError(f"encoded must be an Encoded table (see discretize), got {type(encoded).__name__}")
    if name not in TASKS:
        raise DataError(f"task must be one of {sorted(TASKS)}, got {name!r}")
    attrs = release_attributes(encoded)
    if not attrs:
        raise DataError("no attributes to release besides the target")
    sizes = [encoded.domain_sizes[a] for a in attrs]
    if name == "prediction":
        tables, bias = _fit_logistic(encoded, attrs, sizes, ridge)
        return _task(name, attrs, tables, bias, "sigmoid", "abs")
    if name == "threshold":
        return _threshold_task(encoded, attrs, sizes, attribute, threshold)
    if name == "entropy":
        return _entropy_task(encoded, attrs, sizes)
    blocks: list[np.ndarray] = []
    for a, m in zip(attrs, sizes, strict=True):
        if name == "mismatch":
            blocks.append(np.eye(m) / np.sqrt(2.0 * len(attrs)))
        elif encoded.schema.kind(a) in ("numeric", "ordinal"):
            blocks.append(_coordinate(encoded, a)[:, None])
        else:
            blocks.append(np.eye(m) / np.sqrt(2.0))
    return _task(name, attrs, _block_tables(blocks), 0.0, "identity", "sq")


def _task(
    name: str,
    attrs: tuple[str, ...],
    tables: list[np.ndarray],
    bias: float,
    link: Literal["identity", "sigmoid"],
    kind: Literal["sq", "abs"],
    population: Literal["entropy"] | None = None,
) -> Task:
    sig = f"{name}|{','.join(attrs)}|{_fingerprint(np.array([bias]), *tables)}"
    return Task(
        name,
        attrs,
        tuple(tables),
        float(bias),
        link,
        kind,
        sig,
        TASKS[name],
        population,
    )


def _block_tables(blocks: list[np.ndarray]) -> list[np.ndarray]:
    """Place per-attribute blocks (m_l x w_l) side by side: table l is m_l x sum(w), zero outside block l."""
    dim = sum(b.shape[1] for b in blocks)
    tables, offset = [], 0
    for b in blocks:
        t = np.zeros((b.shape[0], dim))
        t[:, offset : offset + b.shape[1]] = b
        tables.append(t)
        offset += b.shape[1]
    return tables


def _entropy_task(encoded: Encoded, attrs: tuple[str, ...], sizes: list[int]) -> Task:
    """Surprisal coordinates ``s_l(v) = -ln((count_l(v) + 1/2) / (n + m_l / 2))`` on the fitting data."""
    n = len(encoded.codes)
    blocks = []
    for a, m in zip(attrs, sizes, strict=True):
        counts = np.bincount(encoded.codes[a].to_numpy(), minlength=m)[:m]
        blocks.append(-np.log((counts + 0.5) / (n + 0.5 * m))[:, None])
    return _task("entropy", attrs, _block_tables(blocks), 0.0, "identity", "abs", population="entropy")


def _threshold_task(
    encoded: Encoded, attrs: tuple[str, ...], sizes: list[int], attribute: str | None, threshold: float | None
) -> Task:
    if attribute is None:
        ranked = [a for a in attrs if encoded.schema.kind(a) in ("numeric", "ordinal")]
        attribute = (ranked or list(attrs))[0]
    if attribute not in attrs:
        raise DataError(f"attribute {attribute!r} is not a released attribute")
    j = attrs.index(attribute)
    levels = np.asarray(encoded.levels[attribute])
    if threshold is None:
        values = np.arange(sizes[j], dtype=float)
        threshold_code = float(np.median(encoded.codes[attribute].to_numpy()))
        above = values >= threshold_code
    else:
        try:
            above = levels.astype(float) >= float(threshold)
        except (TypeError, ValueError) as exc:
            raise DataError(f"attribute {attribute!r} has non-numeric levels; no threshold applies") from exc
    tables = [np.zeros((m, 1)) for m in sizes]
    tables[j][:, 0] = above.astype(float)
    return _task("threshold", attrs, tables, 0.0, "identity", "abs")


def positive_target(t_fit: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The prediction task's 0/1 label of target codes ``t``, by the rule fitted on codes ``t_fit``: the
    top code of a binary target, else codes above the median (000), or at or above it when no code of
    ``t_fit`` is above it (a 3-class target whose most frequent class sorts last had no positives, and the
    OPT LPs then optimised solver noise)."""
    if np.unique(t_fit).size <= 2:
        return t == t_fit.max()
    median = np.median(t_fit)
    return t > median if np.any(t_fit > median) else t >= median


def _fit_logistic(
    encoded: Encoded, attrs: tuple[str, ...], sizes: list[int], ridge: float
) -> tuple[list[np.ndarray], float]:
    target = encoded.schema.target
    if target is None:
        raise DataError("the prediction task needs a target column: choose the column it should predict")
    t = encoded.codes[target].to_numpy()
    y = positive_target(t, t).astype(float)
    X = encoded.codes[list(attrs)].to_numpy()
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    onehot = np.zeros((X.shape[0], int(offsets[-1])))
    onehot[np.arange(X.shape[0])[:, None], X + offsets[:-1]] = 1.0

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = onehot @ w[1:] + w[0]
        # mean logistic loss: log(1 + e^z) - y z, computed stably
        f = np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * ridge / len(y) * np.dot(w[1:], w[1:])
        r = (0.5 * (1.0 + np.tanh(0.5 * z)) - y) / len(y)
        g = np.concatenate([[r.sum()], onehot.T @ r + ridge / len(y) * w[1:]])
        return float(f), g

    res = minimize(objective, np.zeros(onehot.shape[1] + 1), jac=True, method="L-BFGS-B")
    w = res.x
    tables = [w[1 + offsets[i] : 1 + offsets[i + 1]][:, None].copy() for i in range(len(attrs))]
    return tables, float(w[0])


# --------------------------------------------------------------------------- population metrics (Case III)


def _code_tables(true_codes: object, priv_codes: object) -> tuple[np.ndarray, np.ndarray]:
    """Both tables (arrays or DataFrames) as int64 code matrices: records x the same attributes, codes
    >= 0 (DataError naming the argument otherwise)."""
    tables = []
    for name, codes in (("true_codes", true_codes), ("priv_codes", priv_codes)):
        arr = np.asarray(codes)
        if arr.ndim != 2 or 0 in arr.shape:
            raise DataError(
                f"{name} must be a 2-D table (records x attributes) of at least one record, "
                f"got shape {arr.shape}"
            )
        if arr.dtype.kind not in "iu":
            raise DataError(f"{name} must hold integer codes (see discretize), got dtype {arr.dtype}")
        if arr.min() < 0:
            raise DataError(f"{name} must hold codes >= 0, got {arr.min()}")
        tables.append(arr.astype(np.int64, copy=False))
    if tables[0].shape[1] != tables[1].shape[1]:
        raise DataError(
            f"true_codes and priv_codes must have the same attributes, got shapes {[t.shape for t in tables]}"
        )
    return tables[0], tables[1]


def _entropy_of_counts(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def _marginal_entropies(codes: np.ndarray) -> np.ndarray:
    return np.array([_entropy_of_counts(np.bincount(col)) for col in codes.T])


def _row_ids(codes: np.ndarray) -> np.ndarray:
    """One integer per record, equal exactly when the records are equal (mixed radix over the columns,
    re-numbered densely whenever the next column would overflow int64). ``np.unique(codes, axis=0)``
    sorts the rows as opaque bytes and took 96 % of an adult sweep (0.07 s per call, 3 calls per release)."""
    codes = np.asarray(codes, dtype=np.int64)
    ids = np.zeros(codes.shape[0], dtype=np.int64)
    base = 1
    for col in codes.T:
        size = int(col.max()) + 1 if col.size else 1
        if base * size >= 2**62:
            _, ids = np.unique(ids, return_inverse=True)
            base = int(ids.max()) + 1
        ids = ids * size + col
        base *= size
    return ids


def _joint_entropy(codes: np.ndarray) -> float:
    _, counts = np.unique(_row_ids(codes), return_counts=True)
    return _entropy_of_counts(counts)


def marginal_tv(true_codes: np.ndarray, priv_codes: np.ndarray) -> float:
    """Mean over attributes of the total-variation distance between the two empirical marginals."""
    a, b = _code_tables(true_codes, priv_codes)
    tv = []
    for j in range(a.shape[1]):
        m = int(max(a[:, j].max(), b[:, j].max())) + 1
        pa = np.bincount(a[:, j], minlength=m) / a.shape[0]
        pb = np.bincount(b[:, j], minlength=m) / b.shape[0]
        tv.append(0.5 * np.abs(pa - pb).sum())
    return float(np.mean(tv))


def entropy_change(true_codes: np.ndarray, priv_codes: np.ndarray) -> float:
    """Mean over attributes of ``|H(X_l) - H(Y_l)|`` (nats), the marginal-entropy change of 000 Case III."""
    a, b = _code_tables(true_codes, priv_codes)
    return float(np.mean(np.abs(_marginal_entropies(a) - _marginal_entropies(b))))


def total_correlation_change(true_codes: np.ndarray, priv_codes: np.ndarray) -> float:
    """``|TC(X) - TC(Y)|`` with ``TC = sum_l H(X_l) - H(X)`` (nats, empirical joint), 000 Case III."""
    a, b = _code_tables(true_codes, priv_codes)
    tc = lambda c: float(_marginal_entropies(c).sum() - _joint_entropy(c))  # noqa: E731
    return abs(tc(a) - tc(b))


def entropy_loss(true_codes: np.ndarray, priv_codes: np.ndarray) -> float:
    """Case III loss of 000 (Sec. IV-A): the change of the information-theoretic statistics (nats),
    ``sum_l |H(X_l) - H(Y_l)| + |H(X) - H(Y)| + |TC(X) - TC(Y)|`` with empirical (plug-in) entropies of
    the marginals, of the joint records, and ``TC = sum_l H(X_l) - H(X)``."""
    a, b = _code_tables(true_codes, priv_codes)
    ha, hb = _marginal_entropies(a), _marginal_entropies(b)
    ja, jb = _joint_entropy(a), _joint_entropy(b)
    return float(np.abs(ha - hb).sum() + abs(ja - jb) + abs((ha.sum() - ja) - (hb.sum() - jb)))


def population_metrics(true_codes: np.ndarray, priv_codes: np.ndarray) -> dict[str, float]:
    """All three population metrics: ``marginal_tv``, ``entropy_change``, ``total_correlation_change``
    (each table's entropies computed once: the held-out evaluation calls this 20 times per budget)."""
    a, b = _code_tables(true_codes, priv_codes)
    ha, hb = _marginal_entropies(a), _marginal_entropies(b)
    tc_a, tc_b = ha.sum() - _joint_entropy(a), hb.sum() - _joint_entropy(b)
    return {
        "marginal_tv": marginal_tv(a, b),
        "entropy_change": float(np.mean(np.abs(ha - hb))),
        "total_correlation_change": float(abs(tc_a - tc_b)),
    }
