"""mdp_core.data.dependency: NMI matrix and dependency groups."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import mdp_core as core
from mdp_core import DataError


def _nmi_pair(a: np.ndarray, b: np.ndarray) -> float:
    """Independent plug-in computation with pandas crosstab."""
    joint = pd.crosstab(a, b).to_numpy() / len(a)
    pa, pb = joint.sum(1), joint.sum(0)
    h = lambda p: -sum(v * np.log(v) for v in p if v > 0)  # noqa: E731
    mi = sum(
        joint[i, j] * np.log(joint[i, j] / (pa[i] * pb[j]))
        for i in range(len(pa))
        for j in range(len(pb))
        if joint[i, j] > 0
    )
    denom = h(pa) + h(pb)
    return 0.0 if denom == 0 else 2 * mi / denom


codes_strategy = arrays(
    np.int64, st.tuples(st.integers(2, 60), st.integers(2, 5)), elements=st.integers(0, 3)
)


def _frame(arr: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(arr, columns=[f"c{i}" for i in range(arr.shape[1])])


@given(codes_strategy)
def test_nmi_properties_and_values(arr: np.ndarray) -> None:
    nmi = core.nmi_matrix(_frame(arr)).to_numpy()
    assert np.allclose(nmi, nmi.T) and np.all(nmi >= 0) and np.all(nmi <= 1)
    assert np.all(np.diag(nmi) == 1)
    for i, j in itertools.combinations(range(arr.shape[1]), 2):
        assert nmi[i, j] == pytest.approx(_nmi_pair(arr[:, i], arr[:, j]), abs=1e-10)


@given(codes_strategy, st.permutations(range(4)))
def test_nmi_invariant_to_relabelling(arr: np.ndarray, perm: list[int]) -> None:
    relabelled = np.asarray(perm)[arr]
    np.testing.assert_allclose(core.nmi_matrix(_frame(relabelled)), core.nmi_matrix(_frame(arr)), atol=1e-12)


def test_nmi_known_cases() -> None:
    a = np.array([0, 1, 2, 0, 1, 2])
    df = pd.DataFrame({"a": a, "copy": (a + 1) % 3, "const": 0, "indep": [0, 0, 0, 1, 1, 1]})
    nmi = core.nmi_matrix(df)
    assert nmi.loc["a", "copy"] == pytest.approx(1.0)
    assert nmi.loc["a", "const"] == 0.0 and nmi.loc["const", "const"] == 1.0
    assert nmi.loc["a", "indep"] == pytest.approx(0.0, abs=1e-12)


@given(
    st.integers(2, 8).flatmap(
        lambda k: st.tuples(st.just(k), arrays(np.float64, (k, k), elements=st.floats(0, 1)), st.floats(0, 1))
    )
)
def test_groups_are_connected_components(case: tuple[int, np.ndarray, float]) -> None:
    k, raw, tau = case
    sym = np.triu(raw, 1) + np.triu(raw, 1).T + np.eye(k)
    names = [f"v{i}" for i in range(k)]
    nmi = pd.DataFrame(sym, index=names, columns=names)
    groups = core.dependency_groups(nmi, tau)
    graph = nx.Graph()
    graph.add_nodes_from(names)
    graph.add_edges_from((names[i], names[j]) for i in range(k) for j in range(i + 1, k) if sym[i, j] > tau)
    assert sorted(map(sorted, groups)) == sorted(map(sorted, nx.connected_components(graph)))
    assert sorted(a for g in groups for a in g) == sorted(names)


def test_threshold_is_strict_and_cap_drops_weakest_edges() -> None:
    names = ["a", "b", "c", "d"]
    m = np.array([[1, 0.9, 0.3, 0.0], [0.9, 1, 0.5, 0.0], [0.3, 0.5, 1, 0.2], [0, 0, 0.2, 1]])
    nmi = pd.DataFrame(m, index=names, columns=names)
    assert core.dependency_groups(nmi, 0.2) == [("a", "b", "c"), ("d",)]
    sizes = {"a": 4, "b": 5, "c": 6, "d": 10}
    # a-b-c joint domain 120 > 50: drop 0.3 (a-c) then 0.5 (b-c) -> (a, b) 20 and (c,) 6
    assert core.dependency_groups(nmi, 0.2, domain_sizes=sizes, max_domain=50) == [("a", "b"), ("c",), ("d",)]
    # a single attribute over the cap stays alone
    assert core.dependency_groups(nmi, 0.2, domain_sizes=sizes, max_domain=5)[-1] == ("d",)


def test_pairs_sparse_and_bad_arguments() -> None:
    names = ["a", "b", "c"]
    nmi = pd.DataFrame([[1, 0.2, 0.7], [0.2, 1, 0.1], [0.7, 0.1, 1]], index=names, columns=names)
    pairs = core.nmi_pairs(nmi)
    assert pairs[["a", "b"]].values.tolist() == [["a", "c"], ["a", "b"], ["b", "c"]]
    sparse = core.sparse_pairs(nmi, {"a": 10, "b": 10, "c": 2}, 400)
    assert sparse[["a", "b"]].values.tolist() == [["a", "b"]]  # 4 rows per cell
    assert sparse["mi_bias"].iloc[0] == pytest.approx(81 / 800)
    with pytest.raises(DataError, match="tau must lie in"):
        core.dependency_groups(nmi, 1.5)
    with pytest.raises(DataError, match="domain_sizes is required"):
        core.dependency_groups(nmi, 0.1, max_domain=10)
    with pytest.raises(TypeError, match="nmi must be a DataFrame"):
        core.dependency_groups(nmi.to_numpy(), 0.1)  # type: ignore[arg-type]
    with pytest.raises(DataError, match="non-negative integers"):
        core.nmi_matrix(pd.DataFrame({"a": [0.5, 1.5]}))


def test_constant_columns_have_zero_nmi() -> None:
    # Regression: ln n - n ln n / n is +4e-16, not 0, for n = 23; two constants then looked identical.
    nmi = core.nmi_matrix(pd.DataFrame({"c1": np.zeros(23, dtype=int), "c2": np.zeros(23, dtype=int)}))
    assert nmi.loc["c1", "c2"] == 0.0


@given(
    sizes=st.lists(st.integers(2, 40), min_size=2, max_size=6),
    numeric_mask=st.lists(st.booleans(), min_size=6, max_size=6),
    max_cells=st.integers(4, 400),
)
def test_fewer_bins_fixes_every_pair_it_can_changing_only_numeric_attributes(
    sizes: list[int], numeric_mask: list[bool], max_cells: int
) -> None:
    names = [f"x{i}" for i in range(len(sizes))]
    domain = dict(zip(names, sizes, strict=True))
    numeric = {n for n, is_numeric in zip(names, numeric_mask, strict=False) if is_numeric}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if domain[a] * domain[b] > max_cells]
    lower, left = core.fewer_bins(pairs, domain, numeric, max_cells)
    after = {**domain, **lower}
    assert set(lower) <= numeric and all(2 <= v < domain[a] for a, v in lower.items())
    assert list(lower) == [n for n in names if n in lower]  # in the table's order
    assert left == [(a, b) for a, b in pairs if after[a] * after[b] > max_cells]
    for a, b in left:  # nothing left could be fixed: no numeric side has room for 2 bins within max_cells
        assert all(
            not (x in numeric and 2 * after[y] <= max_cells < after[x] * after[y])
            for x, y in ((a, b), (b, a))
        )


def test_fewer_bins_on_heart_lowers_age_and_trestbps_to_seven() -> None:
    """The data page's advice on heart's defaults (8 bins, 303 rows, 5 rows per cell: at most 60 cells)."""
    domain = {"age": 8, "trestbps": 8, "thalach": 8, "sex": 2}
    pairs = [("age", "trestbps"), ("age", "thalach"), ("trestbps", "thalach")]
    assert core.fewer_bins(pairs, domain, {"age", "trestbps", "thalach"}, 303 / 5) == (
        {"age": 7, "trestbps": 7},
        [],
    )


def test_nmi_of_a_wide_column_needs_memory_of_the_rows_not_of_the_grid() -> None:
    """An identifier re-included as nominal (one level per row): every pair's histogram spanned
    (largest domain)^2 cells, 324 MB at 6,000 rows, 3.2 GB at 20,000, ~29 GB at the 60,000-row cap."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n = 6000
    wide = rng.permutation(n)
    codes = pd.DataFrame({"id": wide, "id2": (wide + 1) % n, "a": rng.integers(0, 8, n), "b": wide % 3})
    tracemalloc.start()
    try:
        nmi = core.nmi_matrix(codes)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16e6
    assert nmi.loc["id", "id2"] == pytest.approx(1.0)  # one determines the other
    h_id, h_b = np.log(n), -sum(c / n * np.log(c / n) for c in np.bincount(wide % 3))
    assert nmi.loc["id", "b"] == pytest.approx(2 * h_b / (h_id + h_b))  # b is a function of id
    small = codes[["a", "b"]]
    assert nmi.loc["a", "b"] == pytest.approx(core.nmi_matrix(small).loc["a", "b"], abs=1e-15)
