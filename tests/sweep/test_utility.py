"""task_utility against independent computations (loops, pairwise AUC, plug-in entropies)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import mdp_core as core
from mdp_core import DataError
from mdp_core.dephdp import prediction_labels, task_utility


@pytest.fixture(scope="module")
def encoded() -> core.Encoded:
    rng = np.random.default_rng(7)
    n = 240
    a = rng.integers(0, 4, n)
    df = pd.DataFrame(
        {
            "a": a,
            "b": np.clip(a + rng.integers(-1, 2, n), 0, 4),
            "colour": rng.choice(["red", "green", "blue"], n),
            "y": (a + rng.integers(0, 3, n) > 3).astype(int),
        }
    )
    return core.discretize(df, core.infer_schema(df, target="y"))


def _noisy(x: np.ndarray, sizes: list[int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = x.copy()
    flip = rng.random(x.shape) < 0.4
    y[flip] = (rng.integers(0, 10, x.shape) % np.array(sizes))[flip]
    return y


def _xy(encoded: core.Encoded, task: core.Task) -> tuple[np.ndarray, np.ndarray]:
    x = encoded.codes[list(task.attributes)].to_numpy()
    return x, _noisy(x, [encoded.domain_sizes[a] for a in task.attributes], 3)


def test_prediction_accuracy_auc_and_mean_change(encoded: core.Encoded) -> None:
    task = core.make_task("prediction", encoded)
    x, y = _xy(encoded, task)
    labels = prediction_labels(encoded, encoded.codes)
    assert np.array_equal(labels, encoded.codes["y"].to_numpy())  # binary target: code of the max level
    u = task_utility(task, x, y, labels=labels)
    fx, fy = task.utility(x)[:, 0], task.utility(y)[:, 0]
    assert u.metric == "accuracy" and u.higher_is_better
    assert u.value == pytest.approx(np.mean((fy >= 0.5) == (labels == 1)))
    assert u.reference == pytest.approx(np.mean((fx >= 0.5) == (labels == 1)))
    assert u.metrics["mean_abs_change"] == pytest.approx(np.mean(np.abs(fx - fy)))
    assert u.loss == pytest.approx(np.mean(np.abs(fx - fy)))  # the 000 prediction loss
    pos, neg = fy[labels == 1], fy[labels == 0]
    pairwise = np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg])
    assert u.metrics["auc"] == pytest.approx(pairwise, abs=1e-12)
    assert u.relative == pytest.approx(u.value / u.reference)
    same = task_utility(task, x, x, labels=labels)
    assert same.value == same.reference and same.metrics["mean_abs_change"] == 0.0
    assert task_utility(task, x, y).metric == "agreement"


def test_record_fidelity_is_the_mean_dp_distance(encoded: core.Encoded) -> None:
    task = core.make_task("record", encoded)
    x, y = _xy(encoded, task)
    for p in (1.0, 2.0, math.inf):
        u = task_utility(task, x, y, encoded=encoded, p=p)
        per_record = []
        for xi, yi in zip(x, y, strict=True):
            d = [encoded.components[a][xi[j], yi[j]] for j, a in enumerate(task.attributes)]
            per_record.append(max(d) if math.isinf(p) else sum(v**p for v in d) ** (1 / p))
        assert u.value == pytest.approx(np.mean(per_record), abs=1e-12)
        assert not u.higher_is_better and u.reference == 0.0
    with pytest.raises(DataError, match="record fidelity needs encoded="):
        task_utility(task, x, y)


def test_frequency_and_entropy_tasks(encoded: core.Encoded) -> None:
    mismatch = core.make_task("mismatch", encoded)
    x, y = _xy(encoded, mismatch)
    tv = np.mean(
        [
            0.5
            * np.abs(
                np.bincount(x[:, j], minlength=5) / len(x) - np.bincount(y[:, j], minlength=5) / len(y)
            ).sum()
            for j in range(x.shape[1])
        ]
    )
    assert task_utility(mismatch, x, y).value == pytest.approx(tv, abs=1e-12)
    threshold = core.make_task("threshold", encoded)
    u = task_utility(threshold, x, y)
    ind = threshold.utility(x)[:, 0], threshold.utility(y)[:, 0]
    assert u.value == pytest.approx(abs(ind[0].mean() - ind[1].mean()), abs=1e-12)
    entropy = core.make_task("entropy", encoded)
    u = task_utility(entropy, x, y)

    def h_bits(col: np.ndarray) -> float:
        p = np.bincount(col) / len(col)
        p = p[p > 0]
        return float(-(p * np.log2(p)).sum())

    want = np.mean([abs(h_bits(x[:, j]) - h_bits(y[:, j])) for j in range(x.shape[1])])
    assert u.metric == "entropy_change_bits" and u.value == pytest.approx(want, abs=1e-12)


def test_inputs_are_checked(encoded: core.Encoded) -> None:
    task = core.make_task("prediction", encoded)
    x, _ = _xy(encoded, task)
    with pytest.raises(DataError, match=r"y_codes must have shape \(n, 3\)"):
        task_utility(task, x, x[:, :2])
    with pytest.raises(DataError, match="x_codes and y_codes must have the same shape"):
        task_utility(task, x, x[:10])
    with pytest.raises(TypeError, match="must hold integer codes"):
        task_utility(task, x, x.astype(float))
    with pytest.raises(DataError, match="labels must be 240 values"):
        task_utility(task, x, x, labels=np.full(240, 2))
    with pytest.raises(TypeError, match="task must be a Task"):
        task_utility("prediction", x, x)  # type: ignore[arg-type]
    frame = task_utility(task, encoded.codes, encoded.codes)  # DataFrames: columns selected by name
    assert frame.value == 1.0
