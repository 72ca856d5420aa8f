"""The sweep's input: the encoded table of a spec's dataset, prepared once per process and scattered once."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from mdp_core.data import Encoded, encode_table, load_dataset
from mdp_core.dephdp import (
    majority_rate,
    prediction_labels,
    release_attributes,
    split_encoded,
)
from mdp_core.errors import DataError
from mdp_core.sweep.spec import SweepSpec

__all__ = ["SweepData", "prepare_data"]

#: Prepared sweep data of recent sweeps in this process (the last 4), see :func:`prepare_data`.
_PREPARED: OrderedDict[Hashable, SweepData] = OrderedDict()
_PREPARED_LOCK = threading.Lock()


_DOCUMENTED_TARGETS = {"heart": "target", "adult": "income", "wine": "quality"}


@dataclass(frozen=True, eq=False)
class SweepData:
    """What every task needs: the fitting and held-out splits, the test records' 0/1 labels, and (computed
    once here, not per task) the released attributes and the test records' codes on them."""

    fit: Encoded
    test: Encoded
    labels: np.ndarray | None
    attributes: tuple[str, ...]
    x_test: np.ndarray

    @property
    def majority_rate(self) -> float | None:
        """Held-out accuracy of always predicting the more frequent label (:func:`majority_rate`; None
        without labels)."""
        if self.labels is None or len(self.labels) == 0:
            return None
        return majority_rate(self.labels)


def _target(spec: SweepSpec, columns: Sequence[str]) -> str | None:
    if spec.target is not None:
        if spec.target not in columns:
            raise DataError(f"target {spec.target!r} is not a column of {spec.dataset!r}")
        return spec.target
    try:  # the data layer's documented targets, when it has them
        from mdp_core.data.io import SAMPLE_TARGETS
    except ImportError:
        SAMPLE_TARGETS = _DOCUMENTED_TARGETS
    target = SAMPLE_TARGETS.get(spec.dataset)
    return target if target in columns else None


def prepare_data(spec: SweepSpec, encoded: Encoded | None = None) -> SweepData:
    """Load and discretise the spec's dataset (unless ``encoded`` is given) and split it (seeded by the spec).

    Parameters
    ----------
    spec : SweepSpec
    encoded : Encoded, optional
        An already discretised table (e.g. the app's current one); ``spec.dataset`` is then only a label.
    """
    if encoded is not None and not isinstance(encoded, Encoded):
        if type(encoded).__name__ == Encoded.__name__:  # said "must be an Encoded table, got Encoded"
            raise DataError(
                "the table was encoded by the mdp_core code loaded before its files changed and it was "
                "imported again; restart the app (or encode the table again) so that one code runs the sweep"
            )
        raise TypeError(f"encoded must be an Encoded table, got {type(encoded).__name__}")
    if encoded is None:
        # an embedded sample is loaded and discretised once per process (adult: ~1 CPU s, 3 s under load);
        # a file path is read again (it may have changed on disk)
        choices = (
            spec.include,
            spec.exclude,
            spec.kind_overrides,
            spec.column_bins,
            spec.column_ranges,
            spec.column_categories,
        )
        key: Hashable = (
            "sample",
            spec.dataset,
            spec.seed,
            spec.bins,
            spec.target,
            spec.fit_fraction,
            choices,
        )
        if os.path.exists(spec.dataset):
            key = None
    else:
        key = ("encoded", encoded.fingerprint, spec.seed, spec.fit_fraction)
    data = _PREPARED.get(key) if key is not None else None
    if data is None:
        data = _prepare(spec, encoded)
        if key is not None:
            with _PREPARED_LOCK:
                _PREPARED[key] = data
                while len(_PREPARED) > 4:
                    _PREPARED.popitem(last=False)
    if "prediction" in spec.tasks and data.fit.schema.target is None:
        raise DataError(f"the prediction task needs a target column; {spec.dataset!r} has none: set 'target'")
    return data


def _prepare(spec: SweepSpec, encoded: Encoded | None) -> SweepData:
    if encoded is None:
        df = load_dataset(spec.dataset, seed=spec.seed)
        target = _target(spec, [str(c) for c in df.columns])
        encoded = encode_table(
            df,
            target=target,
            include=spec.include,
            exclude=spec.exclude,
            kinds=spec.kind_overrides,
            bins=spec.column_bins,
            default_bins=spec.bins,
            ranges=dict(spec.column_ranges),
            categories=dict(spec.column_categories),
            strict=True,
        )
    fit, test = split_encoded(encoded, spec.fit_fraction, np.random.default_rng(spec.seed))
    labels = prediction_labels(fit, test.codes) if encoded.schema.target is not None else None
    attrs = tuple(release_attributes(fit))
    x_test = test.codes[list(attrs)].to_numpy().astype(np.int64)
    return SweepData(fit, test, labels, attrs, x_test)
