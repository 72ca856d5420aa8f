"""Attribute dependencies: normalised mutual information and the groups it induces (000 Sec. III-B).

``I_ij = 2 MI(X_i; X_j) / (H(X_i) + H(X_j))`` from empirical frequencies (natural logs), in [0, 1], with 1 on
the diagonal and 0 where ``H_i + H_j = 0``. Attributes joined by an edge ``I_ij > tau`` (strict) form one
group (connected components).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import networkx as nx
import numpy as np
import pandas as pd

from mdp_core.errors import DataError

__all__ = [
    "dependency_graph",
    "dependency_groups",
    "fewer_bins",
    "group_domain_size",
    "nmi_matrix",
    "nmi_pairs",
    "sparse_pairs",
]


def _check_codes(codes: pd.DataFrame) -> np.ndarray:
    if not isinstance(codes, pd.DataFrame):
        raise TypeError(f"codes must be a pandas DataFrame of integer codes, got {type(codes).__name__}")
    if codes.shape[1] < 1 or len(codes) < 1:
        raise DataError("codes must have at least one row and one column")
    arr = codes.to_numpy()
    if not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0:
        raise DataError("codes must be non-negative integers (use mdp_core.discretize)")
    return arr.astype(np.int64, copy=False)


def nmi_matrix(codes: pd.DataFrame) -> pd.DataFrame:
    """Normalised mutual information of every pair of columns.

    ``MI = H_i + H_j - H_ij`` from one joint histogram (``np.bincount``) per pair, over the pair's own
    grid ``m_i x m_j``; a grid far larger than the rows (wide columns) is counted by sorting instead, so
    memory stays O(rows). The histogram was measured faster than a sparse one-hot product ``X^T X``, a
    stacked single histogram and the plain per-pair loop (bench/nmi.py).

    Parameters
    ----------
    codes : DataFrame
        Integer codes ``0..m_j-1`` per column (``Encoded.codes``).

    Returns
    -------
    DataFrame
        Symmetric, values in [0, 1], diagonal 1, indexed by column names.
    """
    arr = _check_codes(codes)
    n, k = arr.shape
    widths = arr.max(axis=0) + 1
    ent = np.array([_entropy_of_counts(np.bincount(arr[:, i]), n) for i in range(k)])
    nmi = np.eye(k)
    for i in range(k - 1):
        for j in range(i + 1, k):
            denom = ent[i] + ent[j]
            if denom > 0:
                counts = _joint_counts(arr[:, i], arr[:, j], int(widths[i]), int(widths[j]))
                joint = _entropy_of_counts(counts, n)
                nmi[i, j] = nmi[j, i] = min(max(2.0 * (denom - joint) / denom, 0.0), 1.0)
    names = list(codes.columns)
    return pd.DataFrame(nmi, index=names, columns=names)


def _joint_counts(a: np.ndarray, b: np.ndarray, width_a: int, width_b: int) -> np.ndarray:
    """Counts of the observed pairs (a, b), codes ``a * width_b + b``. A histogram over the full grid when
    it is at most a few times the rows (fast); else counts of the distinct pairs only (sorting), so two
    wide columns (an identifier re-included: 20,000 x 20,000 cells, 3.2 GB) cost O(rows) memory."""
    joint = a * width_b + b
    if width_a * width_b <= max(4 * joint.size, 1 << 16):
        return np.bincount(joint)
    return np.unique(joint, return_counts=True)[1]


def _entropy_of_counts(counts: np.ndarray, n: int) -> float:
    """Shannon entropy (nats) of the empirical distribution ``counts / n``: ``ln n - sum c ln c / n``."""
    c = counts[counts > 0].astype(np.float64)
    if c.size <= 1:
        return 0.0  # exactly: ln n - n ln n / n would leave rounding noise and fake a dependency
    return max(float(np.log(n) - (c * np.log(c)).sum() / n), 0.0)


def nmi_pairs(nmi: pd.DataFrame) -> pd.DataFrame:
    """Attribute pairs sorted by NMI, strongest first: columns ``a``, ``b``, ``nmi``."""
    names = list(nmi.columns)
    i, j = np.triu_indices(len(names), k=1)
    values = nmi.to_numpy()[i, j]
    order = np.argsort(-values, kind="stable")
    return pd.DataFrame(
        {"a": [names[t] for t in i[order]], "b": [names[t] for t in j[order]], "nmi": values[order]}
    )


def dependency_graph(nmi: pd.DataFrame, tau: float) -> nx.Graph:
    """Graph on the attributes with an edge (weight = NMI) wherever ``I_ij > tau``."""
    _check_nmi(nmi)
    tau = _check_tau(tau)
    graph = nx.Graph()
    graph.add_nodes_from(nmi.columns)
    values = nmi.to_numpy()
    names = list(nmi.columns)
    for i, j in zip(*np.triu_indices(len(names), k=1), strict=True):
        if values[i, j] > tau:
            graph.add_edge(names[i], names[j], weight=float(values[i, j]))
    return graph


def group_domain_size(group: tuple[str, ...], domain_sizes: Mapping[str, int]) -> int:
    """Joint domain size ``prod_l m_l`` of a group (Python int: never overflows)."""
    missing = [a for a in group if a not in domain_sizes]
    if missing:
        raise DataError(f"domain_sizes has no size for attribute(s) {missing} of the group {list(group)}")
    size = 1
    for a in group:
        size *= int(domain_sizes[a])
    return size


def dependency_groups(
    nmi: pd.DataFrame,
    tau: float,
    *,
    domain_sizes: Mapping[str, int] | None = None,
    max_domain: int | None = None,
) -> list[tuple[str, ...]]:
    """Groups of dependent attributes: connected components of the ``I_ij > tau`` graph.

    With ``max_domain``, a component whose joint domain exceeds it is split by the rule: remove the
    component's weakest edge (smallest NMI; ties broken by attribute order), recompute components, and
    repeat on every part still too large. A single attribute larger than ``max_domain`` stays a group of one.

    Returns
    -------
    list of tuple of str
        Groups in order of their first attribute; attributes inside a group in column order.
    """
    graph = dependency_graph(nmi, tau)
    order = {name: i for i, name in enumerate(nmi.columns)}
    if max_domain is not None:
        if domain_sizes is None:
            raise DataError("domain_sizes is required when max_domain is given")
        if not isinstance(max_domain, (int, np.integer)) or max_domain < 1:
            raise DataError(f"max_domain must be a positive integer, got {max_domain!r}")
        missing = set(nmi.columns) - set(domain_sizes)
        if missing:
            raise DataError(f"domain_sizes lacks attributes {sorted(missing)}")
        _split_large_components(graph, domain_sizes, int(max_domain), order)
    groups = [tuple(sorted(c, key=order.__getitem__)) for c in nx.connected_components(graph)]
    return sorted(groups, key=lambda g: order[g[0]])


def _split_large_components(
    graph: nx.Graph, domain_sizes: Mapping[str, int], max_domain: int, order: Mapping[str, int]
) -> None:
    while True:
        too_large = [
            c
            for c in nx.connected_components(graph)
            if group_domain_size(tuple(c), domain_sizes) > max_domain
        ]
        edges = [e for c in too_large for e in graph.subgraph(c).edges(data="weight")]
        if not edges:
            return
        a, b, _ = min(edges, key=lambda e: (e[2], sorted((order[e[0]], order[e[1]]))))
        graph.remove_edge(a, b)


def _check_nmi(nmi: pd.DataFrame) -> None:
    if not isinstance(nmi, pd.DataFrame):
        raise TypeError(f"nmi must be a DataFrame (see nmi_matrix), got {type(nmi).__name__}")
    if nmi.shape[0] != nmi.shape[1] or list(nmi.index) != list(nmi.columns):
        raise DataError("nmi must be a square matrix indexed by attribute names on both axes")


def _check_tau(tau: float) -> float:
    try:
        t = float(tau)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"tau must be a number, got {type(tau).__name__}") from exc
    if not 0.0 <= t <= 1.0:
        raise DataError(f"tau must lie in [0, 1], got {tau!r}")
    return t


def sparse_pairs(
    nmi: pd.DataFrame, domain_sizes: Mapping[str, int], n_rows: int, *, min_per_cell: float = 5.0
) -> pd.DataFrame:
    """Pairs whose contingency table has fewer than ``min_per_cell`` rows per cell on average.

    For such pairs the plug-in MI is biased upward by about ``(m_i - 1)(m_j - 1) / (2 n)`` nats
    (Miller-Madow), so small samples overstate dependence. Returns a DataFrame with columns ``a``, ``b``,
    ``cells``, ``rows_per_cell`` and ``mi_bias`` (nats), sparsest first.
    """
    if n_rows < 1:
        raise DataError(f"n_rows must be positive, got {n_rows}")
    names = list(nmi.columns)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            cells = int(domain_sizes[a]) * int(domain_sizes[b])
            if n_rows / cells < min_per_cell:
                bias = (int(domain_sizes[a]) - 1) * (int(domain_sizes[b]) - 1) / (2.0 * n_rows)
                rows.append(
                    {"a": a, "b": b, "cells": cells, "rows_per_cell": n_rows / cells, "mi_bias": bias}
                )
    out = pd.DataFrame(rows, columns=["a", "b", "cells", "rows_per_cell", "mi_bias"])
    return out.sort_values("rows_per_cell", kind="stable").reset_index(drop=True)


def fewer_bins(
    pairs: list[tuple[str, str]], domain_sizes: Mapping[str, int], numeric: Collection[str], max_cells: float
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Bin counts that make every pair's contingency table at most ``max_cells`` cells, changing few
    attributes: what to tell a user whose pairs are too sparse for a trustworthy NMI (:func:`sparse_pairs`).

    Greedy: the change that fixes most of the pairs still too large first (an attribute lowered to the most
    bins that fit some partner fixes its pairs with narrower partners too), then the attribute with more
    levels, then the earlier one. A pair left over has no numeric side that 2 bins or more could fix.

    Parameters
    ----------
    pairs : list of (str, str)
        The sparse pairs.
    domain_sizes : mapping
        Levels per attribute (its order breaks ties).
    numeric : collection of str
        The attributes whose bins can change (binned numeric columns).
    max_cells : float
        Most cells a pair's table may have (rows / the wanted rows per cell).

    Returns
    -------
    (dict, list)
        New bin counts (>= 2) by attribute in ``domain_sizes`` order, and the pairs no bin count fixes.
    """
    sizes = {a: int(m) for a, m in domain_sizes.items()}
    order = {a: i for i, a in enumerate(domain_sizes)}
    lower: dict[str, int] = {}
    while True:
        left = [(a, b) for a, b in pairs if sizes[a] * sizes[b] > max_cells]
        options: dict[str, tuple[int, int, int, int]] = {}
        for a in {x for pair in left for x in pair if x in numeric}:
            partners = [sizes[b if a == x else x] for x, b in left if a in (x, b)]
            for widest in set(partners):  # the bins that fit this partner fix every narrower one too
                fits = int(max_cells // widest)
                option = (sum(p <= widest for p in partners), sizes[a], -order[a], fits)
                if 2 <= fits < sizes[a] and (a not in options or option > options[a]):
                    options[a] = option
        if not left or not options:
            return dict(sorted(lower.items(), key=lambda kv: order[kv[0]])), left
        best = max(options, key=options.__getitem__)
        lower[best] = sizes[best] = options[best][3]
