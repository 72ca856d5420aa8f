"""Saving a geo mechanism (DESIGN.md: .npz with arrays targets_km, outputs_km, matrix, eps)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from mdp_core.errors import DataError
from mdp_core.geo.extension import GeoMechanism

__all__ = ["load_mechanism", "save_mechanism"]


def save_mechanism(mech: GeoMechanism, path: str | os.PathLike[str]) -> Path:
    """Write ``mech`` to ``path`` (.npz, compressed): targets_km, outputs_km, matrix, eps (scalar).

    Only verified mechanisms should be exported; every constructor in mdp_core.geo returns repaired,
    normalised matrices (rows sum to 1 within 1e-12). Returns the path written (``.npz`` appended if
    missing, as numpy does).
    """
    if not isinstance(mech, GeoMechanism):
        raise TypeError(f"mech must be a GeoMechanism, got {type(mech).__name__}")
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    if not path.parent.exists():
        raise DataError(f"folder does not exist: {path.parent}")
    np.savez_compressed(
        path,
        targets_km=np.asarray(mech.targets_km, dtype=np.float64),
        outputs_km=np.asarray(mech.outputs_km, dtype=np.float64),
        matrix=np.asarray(mech.matrix, dtype=np.float64),
        eps=np.float64(mech.eps),
    )
    return path


def load_mechanism(path: str | os.PathLike[str]) -> GeoMechanism:
    """Read a file written by :func:`save_mechanism` (seconds = 0, method "loaded")."""
    try:
        with np.load(path) as data:
            return GeoMechanism(
                targets_km=data["targets_km"],
                outputs_km=data["outputs_km"],
                matrix=data["matrix"],
                eps=float(data["eps"]),
                seconds=0.0,
                method="loaded",
            )
    except (OSError, KeyError, ValueError) as exc:
        raise DataError(f"not a saved geo mechanism: {path} ({exc})") from exc
