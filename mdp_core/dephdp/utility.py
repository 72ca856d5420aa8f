"""Utility of a privatised table in the task's own units (DESIGN.md "Definitions the papers leave open").

The 000 task loss (:meth:`~mdp_core.dephdp.tasks.Task.evaluation_loss`) is what DepHDP optimises; a privacy
officer states a target in the task's own units instead. :func:`task_utility` reports both for one
privatisation ``y`` of held-out records ``x``:

* ``"prediction"``: accuracy (and AUC) of the target model ``f`` on the privatised records against the same
  model on the original records (the non-private reference), plus the mean ``|f(x) - f(y)|``. Primary
  metric: ``accuracy`` (higher is better; a target such as "accuracy >= 95 % of non-private" compares it
  with ``reference``). Without labels the primary metric is ``agreement``: the share of records whose
  predicted class is unchanged (reference 1).
* ``"record"`` (record fidelity): mean ``d_p(x, y) = (sum_l d_l(x_l, y_l)^p)^(1/p)`` (``p = inf``: max) over
  records, in the units of the component distances ([0, 1] per attribute; lower is better).
* ``"mismatch"`` and ``"threshold"`` (frequency tasks): total variation between the original and
  privatised marginals: the mean over attributes for ``"mismatch"``, the TV of the indicator
  ``1[x_a >= t]`` (= |share above t before - after|) for ``"threshold"`` (lower is better).
* ``"entropy"``: mean over attributes of ``|H(X_l) - H(Y_l)|`` in bits (plug-in entropies; lower is better).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from mdp_core.data import Encoded
from mdp_core.dephdp.tasks import (
    Task,
    entropy_change,
    marginal_tv,
    positive_target,
    total_correlation_change,
)
from mdp_core.errors import DataError

__all__ = [
    "MAJORITY_TOLERANCE",
    "UTILITY_METRICS",
    "TaskUtility",
    "majority_rate",
    "prediction_labels",
    "task_utility",
]

#: Primary metric per task: (name, unit, higher_is_better).
UTILITY_METRICS: dict[str, tuple[str, str, bool]] = {
    "prediction": ("accuracy", "share of test records classified correctly", True),
    "record": ("mean_distance", "mean d_p per record (component distances in [0, 1])", False),
    "mismatch": ("marginal_tv", "total variation of the marginals", False),
    "threshold": ("marginal_tv", "total variation of the share above the threshold", False),
    "entropy": ("entropy_change_bits", "bits (mean |H(X_l) - H(Y_l)| over attributes)", False),
}


@dataclass(frozen=True)
class TaskUtility:
    """Utility of one privatised table.

    Attributes
    ----------
    task : str
        Task name.
    metric : str
        Name of the primary metric (see :data:`UTILITY_METRICS`).
    value : float
        The primary metric on the privatised records.
    reference : float
        The primary metric of the non-private release (``y = x``): the model's accuracy on the original
        records for prediction, ``0`` for the distance-like metrics.
    unit : str
        What ``value`` measures.
    higher_is_better : bool
        Direction of ``value``.
    loss : float
        The 000 task loss of the release (``Task.evaluation_loss``).
    metrics : dict
        Every metric computed (the primary one included).
    """

    task: str
    metric: str
    value: float
    reference: float
    unit: str
    higher_is_better: bool
    loss: float
    metrics: Mapping[str, float] = field(default_factory=dict)

    @property
    def relative(self) -> float:
        """``value / reference`` for a higher-is-better metric (e.g. 0.95 = 95 % of non-private), else NaN."""
        if self.higher_is_better and self.reference > 0:
            return self.value / self.reference
        return math.nan

    def as_dict(self) -> dict[str, float | str | bool]:
        """Flat JSON-able form: the fields and every metric."""
        out: dict[str, float | str | bool] = {
            "task": self.task,
            "metric": self.metric,
            "value": self.value,
            "reference": self.reference,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "loss": self.loss,
        }
        out.update({k: float(v) for k, v in self.metrics.items()})
        return out


#: An accuracy within this of :func:`majority_rate` is said to be no better than it.
MAJORITY_TOLERANCE = 0.005


def majority_rate(labels: np.ndarray) -> float:
    """Accuracy of always predicting the more frequent of the 0/1 ``labels``: the prediction task's
    accuracy says nothing at or below it (adult: 0.758, what three methods scored at every budget)."""
    share = float(np.mean(np.asarray(labels, dtype=np.float64)))
    return max(share, 1.0 - share)


def prediction_labels(fit: Encoded, codes: pd.DataFrame) -> np.ndarray:
    """Binary labels of ``codes`` by the rule the prediction task's model is fitted with (000 tasks):
    target code ``== max`` for a binary target, else above the fitting split's median (see
    :func:`~mdp_core.dephdp.tasks.positive_target`).

    Parameters
    ----------
    fit : Encoded
        The fitting split (its schema target defines the label).
    codes : DataFrame
        Integer codes of the records to label (must hold the target column).
    """
    target = fit.schema.target
    if target is None:
        raise DataError("the prediction task needs a target column")
    if target not in codes.columns:
        raise DataError(f"codes lacks the target column {target!r}")
    return positive_target(fit.codes[target].to_numpy(), codes[target].to_numpy()).astype(np.int64)


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with mid-ranks for ties); NaN with a single class."""
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = rankdata(scores)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _as_codes(codes: object, task: Task, name: str) -> np.ndarray:
    if isinstance(codes, pd.DataFrame):
        missing = [a for a in task.attributes if a not in codes.columns]
        if missing:
            raise DataError(f"{name} lacks the task's attributes {missing}")
        codes = codes[list(task.attributes)].to_numpy()
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.shape[1] != len(task.attributes):
        raise DataError(f"{name} must have shape (n, {len(task.attributes)}), got {arr.shape}")
    if arr.shape[0] == 0:
        raise DataError(f"{name} must hold at least one record")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integer codes, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _mean_distance(task: Task, x: np.ndarray, y: np.ndarray, encoded: Encoded | None, p: float) -> float:
    if encoded is None:
        raise DataError("record fidelity needs encoded= (the component distance matrices)")
    parts = np.stack(
        [np.asarray(encoded.components[a])[x[:, j], y[:, j]] for j, a in enumerate(task.attributes)], axis=1
    )
    if math.isinf(p):
        return float(np.mean(parts.max(axis=1)))
    if p < 1:
        raise DataError(f"p must be >= 1 or inf, got {p!r}")
    return float(np.mean(np.sum(parts**p, axis=1) ** (1.0 / p)))


def task_utility(
    task: Task,
    x_codes: np.ndarray | pd.DataFrame,
    y_codes: np.ndarray | pd.DataFrame,
    *,
    encoded: Encoded | None = None,
    labels: np.ndarray | None = None,
    p: float = 2.0,
) -> TaskUtility:
    """Utility of the release ``y`` of the records ``x`` in the task's own units (see the module docstring).

    Parameters
    ----------
    task : Task
        The fitted task (``DepHDPResult.task``); its attributes fix the column order of the codes.
    x_codes, y_codes : ndarray or DataFrame
        Original and privatised integer codes, shape (n, len(task.attributes)) (DataFrames: the task's
        attributes are selected by name).
    encoded : Encoded, optional
        Needed by the record-fidelity task (component distances ``d_l``).
    labels : ndarray, optional
        0/1 labels of the records for the prediction task (see :func:`prediction_labels`); without them
        the primary metric is the agreement of the predicted classes.
    p : float
        Exponent of the record metric ``d_p`` (record fidelity).

    Returns
    -------
    TaskUtility
    """
    if not isinstance(task, Task):
        raise TypeError(f"task must be a Task (DepHDPResult.task), got {type(task).__name__}")
    x = _as_codes(x_codes, task, "x_codes")
    y = _as_codes(y_codes, task, "y_codes")
    if x.shape != y.shape:
        raise DataError(f"x_codes and y_codes must have the same shape, got {x.shape} and {y.shape}")
    name = task.name
    if name not in UTILITY_METRICS:
        raise DataError(f"no utility defined for task {name!r}")
    metric, unit, higher = UTILITY_METRICS[name]
    loss = float(task.evaluation_loss(x, y))
    metrics: dict[str, float] = {"marginal_tv_all": marginal_tv(x, y)}
    reference = 0.0
    if name in ("prediction", "threshold"):
        fx, fy = task.utility(x)[:, 0], task.utility(y)[:, 0]
        metrics["mean_abs_change"] = float(np.mean(np.abs(fx - fy)))
    if name == "prediction":
        cx, cy = fx >= 0.5, fy >= 0.5
        metrics["agreement"] = float(np.mean(cx == cy))
        if labels is None:
            metric, unit, reference = "agreement", "share of records whose predicted class is unchanged", 1.0
        else:
            lab = np.asarray(labels)
            if lab.shape != (x.shape[0],) or not np.isin(lab, (0, 1)).all():
                raise DataError(f"labels must be {x.shape[0]} values in {{0, 1}}")
            lab = lab.astype(np.int64)
            metrics["accuracy"] = float(np.mean(cy == (lab == 1)))
            metrics["accuracy_reference"] = float(np.mean(cx == (lab == 1)))
            metrics["auc"] = _auc(lab, fy)
            metrics["auc_reference"] = _auc(lab, fx)
            reference = metrics["accuracy_reference"]
    elif name == "record":
        metrics["mean_distance"] = _mean_distance(task, x, y, encoded, float(p))
    elif name == "mismatch":
        metrics["marginal_tv"] = metrics["marginal_tv_all"]
    elif name == "threshold":
        metrics["marginal_tv"] = abs(float(np.mean(fx)) - float(np.mean(fy)))
    else:  # entropy
        metrics["entropy_change_bits"] = entropy_change(x, y) / math.log(2.0)
        metrics["total_correlation_change_bits"] = total_correlation_change(x, y) / math.log(2.0)
    return TaskUtility(name, metric, metrics[metric], reference, unit, higher, loss, metrics)
