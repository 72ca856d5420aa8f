"""Scenarios: a named, frozen snapshot of every setting of every page, saved as schema-versioned JSON.

A file holds ``{"schema_version": "mdp-lab/scenarios/1", "scenarios": [ {...}, ... ]}``; every scenario
carries the dataset it was made on (name and SHA-256 fingerprint of the canonical CSV, see
:func:`mdp_core.release.dataset_fingerprint`), the data settings (target, excluded columns, kind overrides,
bins, seed), the DepHDP configuration, the release settings (what releases the features: DepHDP or a
baseline; target released or not, its budget), the
utility target of "which eps", and the other pages' widget settings as JSON objects keyed by page.
:func:`load_scenarios` validates everything and says which scenario and which field is wrong.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdp_core.data.public import is_label_list, is_span
from mdp_core.dephdp import BASELINES, DepHDPConfig
from mdp_core.errors import DataError

__all__ = [
    "RELEASE_METHODS",
    "RELEASE_ROWS",
    "SCENARIO_SCHEMA",
    "Scenario",
    "UtilityTarget",
    "load_scenarios",
    "save_scenarios",
    "scenario_from_dict",
    "scenario_to_dict",
]

SCENARIO_SCHEMA = "mdp-lab/scenarios/1"
#: What may release the features: DepHDP, or one of its baselines (:func:`mdp_core.released_by`).
RELEASE_METHODS = ("DepHDP", *BASELINES)
#: Which records a release contains: every record (the channels were tuned on 62.5 % of them), or only the
#: held-out ones the tuning never saw (their channels and the domain of their released values are chosen
#: without them: :data:`mdp_core.release.audit.HELD_OUT_DOMAIN_NOTE`).
RELEASE_ROWS = ("all", "held_out")


@dataclass(frozen=True)
class UtilityTarget:
    """A utility target: ``relative`` (share of the non-private value, e.g. 0.95) or ``absolute``."""

    kind: str = "relative"
    value: float = 0.95

    def __post_init__(self) -> None:
        if self.kind not in ("relative", "absolute"):
            raise DataError(f"utility target kind must be 'relative' or 'absolute', got {self.kind!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, numbers.Real):
            raise TypeError(f"utility target value must be a number, got {self.value!r}")
        v = float(self.value)
        if not math.isfinite(v) or v < 0 or (self.kind == "relative" and v > 1.5):
            raise DataError(f"utility target value must be a number >= 0 (relative <= 1.5), got {v!r}")
        object.__setattr__(self, "value", v)  # a numpy scalar or int becomes the float the JSON holds

    def describe(self, metric: str = "accuracy", *, higher: bool = True) -> str:
        """The target in words; ``higher=False`` for a metric where lower is better (a distance: "≤")."""
        if self.kind == "relative":
            return f"{metric} ≥ {self.value:.0%} of non-private"
        return f"{metric} {'≥' if higher else '≤'} {self.value:g}"


@dataclass(frozen=True)
class Scenario:
    """Every setting needed to reproduce a decision (frozen: a cache key).

    Attributes
    ----------
    name : str
        Shown in comparisons and reports.
    dataset : str
        Sample name (``"heart"``) or file name.
    fingerprint : str
        SHA-256 of the canonical CSV of the table (``""`` if unknown); checked when the scenario is run.
    target : str or None
        Target column.
    seed : int
        Seed of the split, the tuning and the utility measurement.
    release_seed : int or None
        Seed of the release's own random draws; None (default): fresh operating-system entropy, recorded
        nowhere, so that no audit record or report lets anyone redo the draws (privacy audit, stop 63).
    config : DepHDPConfig
        Every DepHDP knob (the page's settings).
    method : str
        What releases the features (:data:`RELEASE_METHODS`): ``"DepHDP"`` (default), or a baseline such as
        ``"ALC+DPN"``, EM on every group, which collapses no column to one value (see
        :func:`mdp_core.released_by`).
    exclude : tuple of str
        Columns never used nor released (identifiers, free text).
    include : tuple of (column, kind or None)
        Columns re-included despite their default exclusion (a date as ``"month"``, ...).
    kind_overrides, bins : tuple of (column, value)
        Data page settings (together: :func:`mdp_core.encode_table`).
    ranges : tuple of (column, lo, hi)
        Declared public ranges of numeric columns (Data page; :func:`mdp_core.discretize`).
    categories : tuple of (column, labels)
        Declared public categories of the other columns (Data page; :mod:`mdp_core.data.public`).
    include_target : bool
        Release the target through its own channel.
    target_eps : float or None
        Its budget (None: the global eps).
    utility_target : UtilityTarget
        The "which eps" target.
    pages : tuple of (page, JSON object text)
        Other pages' widget settings, kept verbatim.
    release_rows : str
        :data:`RELEASE_ROWS`: ``"all"`` (default) or ``"held_out"`` (see :func:`mdp_core.release.scope`).
    """

    name: str
    dataset: str
    config: Any  # DepHDPConfig (typed loosely: no import of mdp_core.dephdp at module level)
    fingerprint: str = ""
    target: str | None = None
    seed: int = 0
    exclude: tuple[str, ...] = ()
    kind_overrides: tuple[tuple[str, str], ...] = ()
    bins: tuple[tuple[str, int], ...] = ()
    include_target: bool = True
    target_eps: float | None = None
    utility_target: UtilityTarget = field(default_factory=UtilityTarget)
    pages: tuple[tuple[str, str], ...] = ()
    method: str = "DepHDP"
    release_rows: str = "all"
    include: tuple[tuple[str, str | None], ...] = ()
    ranges: tuple[tuple[str, float, float], ...] = ()
    categories: tuple[tuple[str, tuple[str, ...]], ...] = ()
    release_seed: int | None = None

    def __post_init__(self) -> None:

        if not isinstance(self.name, str) or not self.name.strip():
            raise DataError("name must be a non-empty string")
        if not isinstance(self.config, DepHDPConfig):
            raise TypeError(f"config must be a DepHDPConfig, got {type(self.config).__name__}")
        if self.method not in RELEASE_METHODS:
            raise DataError(f"method must be one of {list(RELEASE_METHODS)}, got {self.method!r}")
        if self.release_rows not in RELEASE_ROWS:
            raise DataError(f"release_rows must be one of {list(RELEASE_ROWS)}, got {self.release_rows!r}")
        if self.release_seed is not None and (
            not isinstance(self.release_seed, int)
            or isinstance(self.release_seed, bool)
            or self.release_seed < 0
        ):
            raise DataError(f"release_seed must be None or an integer >= 0, got {self.release_seed!r}")
        if self.target_eps is not None and not (math.isfinite(self.target_eps) and self.target_eps > 0):
            raise DataError(f"target_eps must be a positive finite number, got {self.target_eps!r}")
        pages = []
        for page, text in self.pages:
            try:
                obj = json.loads(text)
            except (TypeError, json.JSONDecodeError) as exc:
                raise DataError(f"settings of page {page!r} must be JSON object text") from exc
            if not isinstance(obj, dict):
                raise DataError(f"settings of page {page!r} must be a JSON object")
            pages.append((str(page), json.dumps(obj, sort_keys=True)))
        object.__setattr__(self, "pages", tuple(sorted(pages)))  # canonical: equal settings, equal scenarios
        object.__setattr__(self, "include", tuple(sorted(dict(self.include).items())))


# ------------------------------------------------------------------------------------------------ JSON


def _jsonable_config(config: Any) -> dict:
    out = dataclasses.asdict(config)
    return {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in out.items()}


def scenario_to_dict(s: Scenario) -> dict:
    """JSON-able form of one scenario (``p = inf`` as ``"inf"``; page settings parsed back to objects)."""
    return {
        "name": s.name,
        "dataset": s.dataset,
        "fingerprint": s.fingerprint,
        "target": s.target,
        "seed": s.seed,
        "release_seed": s.release_seed,
        "exclude": list(s.exclude),
        "include": dict(s.include),
        "kind_overrides": dict(s.kind_overrides),
        "bins": dict(s.bins),
        "ranges": {c: [lo, hi] for c, lo, hi in s.ranges},
        "categories": {c: list(labels) for c, labels in s.categories},
        "include_target": s.include_target,
        "target_eps": s.target_eps,
        "utility_target": {"kind": s.utility_target.kind, "value": s.utility_target.value},
        "config": _jsonable_config(s.config),
        "method": s.method,
        "release_rows": s.release_rows,
        "pages": {page: json.loads(text) for page, text in s.pages},
    }


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "dataset": str,
    "fingerprint": str,
    "target": (str, type(None)),
    "seed": int,
    "release_seed": (int, type(None)),
    "exclude": list,
    "include": dict,
    "kind_overrides": dict,
    "bins": dict,
    "ranges": dict,
    "categories": dict,
    "include_target": bool,
    "target_eps": (int, float, type(None)),
    "utility_target": dict,
    "config": dict,
    "method": str,
    "release_rows": str,
    "pages": dict,
}
_REQUIRED = ("name", "dataset", "config")


def _type_name(t: object) -> str:
    names = [x.__name__ for x in (t if isinstance(t, tuple) else (t,))]
    return " or ".join("null" if n == "NoneType" else n for n in names)


def scenario_from_dict(data: object) -> Scenario:
    """Validate and build one scenario; raises DataError naming the bad field."""

    if not isinstance(data, dict):
        raise DataError(f"a scenario must be a JSON object, got {type(data).__name__}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise DataError(f"missing field(s) {missing}")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise DataError(f"unknown field(s) {unknown}")
    for key, kind in _FIELDS.items():
        if key in data and (not isinstance(data[key], kind) or (kind is int and isinstance(data[key], bool))):
            raise DataError(f"field {key!r} must be {_type_name(kind)}, got {type(data[key]).__name__}")
    cfg = dict(data["config"])
    known = {f.name for f in dataclasses.fields(DepHDPConfig)}
    bad = sorted(set(cfg) - known)
    if bad:
        raise DataError(f"config has unknown key(s) {bad}")
    if cfg.get("p") == "inf":
        cfg["p"] = math.inf
    try:
        config = DepHDPConfig(**cfg)
    except TypeError as exc:
        raise DataError(f"config: {exc}") from exc
    except DataError as exc:
        raise DataError(f"config: {exc}") from exc
    ut = data.get("utility_target", {})
    if set(ut) - {"kind", "value"}:
        raise DataError(f"utility_target has unknown key(s) {sorted(set(ut) - {'kind', 'value'})}")
    try:
        utility_target = UtilityTarget(kind=str(ut.get("kind", "relative")), value=ut.get("value", 0.95))
    except TypeError as exc:
        raise DataError(f"utility_target: {exc}") from exc
    bins = data.get("bins", {})
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 2 for v in bins.values()):
        raise DataError("bins must map columns to integers >= 2")
    ranges = data.get("ranges", {})
    if not all(is_span(v) for v in ranges.values()):
        raise DataError("ranges must map columns to [lo, hi] with finite numbers lo < hi")
    categories = data.get("categories", {})
    if not all(is_label_list(v) for v in categories.values()):
        raise DataError("categories must map columns to non-empty lists of labels")
    pages = data.get("pages", {})
    if not all(isinstance(v, dict) for v in pages.values()):
        raise DataError("pages must map page names to JSON objects")
    return Scenario(
        name=data["name"],
        dataset=data["dataset"],
        config=config,
        fingerprint=data.get("fingerprint", ""),
        target=data.get("target"),
        seed=int(data.get("seed", 0)),
        release_seed=data.get("release_seed"),
        exclude=tuple(str(c) for c in data.get("exclude", [])),
        include=tuple(
            sorted((str(k), None if v is None else str(v)) for k, v in data.get("include", {}).items())
        ),
        kind_overrides=tuple(sorted((str(k), str(v)) for k, v in data.get("kind_overrides", {}).items())),
        bins=tuple(sorted((str(k), int(v)) for k, v in bins.items())),
        ranges=tuple(sorted((str(k), float(v[0]), float(v[1])) for k, v in ranges.items())),
        categories=tuple(sorted((str(k), tuple(v)) for k, v in categories.items())),
        include_target=bool(data.get("include_target", True)),
        target_eps=None if data.get("target_eps") is None else float(data["target_eps"]),
        utility_target=utility_target,
        pages=tuple(sorted((str(k), json.dumps(v, sort_keys=True)) for k, v in pages.items())),
        method=data.get("method", "DepHDP"),  # files written before the field release by DepHDP
        release_rows=data.get("release_rows", "all"),  # and before this one, every record
    )


def save_scenarios(scenarios: list[Scenario], path: str | Path | None = None) -> str:
    """The scenarios as one JSON document (written to ``path`` too when given)."""
    items = list(scenarios)
    for s in items:
        if not isinstance(s, Scenario):
            raise TypeError(f"every item must be a Scenario, got {type(s).__name__}")
    names = [s.name for s in items]
    if len(set(names)) != len(names):
        raise DataError(f"scenario names must be unique, got {names}")
    text = json.dumps(
        {"schema_version": SCENARIO_SCHEMA, "scenarios": [scenario_to_dict(s) for s in items]},
        indent=2,
        allow_nan=False,
    )
    if path is not None:
        Path(path).write_text(text + "\n", encoding="utf-8")
    return text


def load_scenarios(source: str | Path | bytes) -> list[Scenario]:
    """Read and validate a scenario file (a path, or its bytes); every error names what to fix."""
    if isinstance(source, bytes):
        raw = source
    elif isinstance(source, (str, Path)):
        try:
            raw = Path(source).read_bytes()
        except OSError as exc:
            raise DataError(f"cannot read the scenario file {source}: {exc.strerror}") from exc
    else:
        raise TypeError(f"source must be a path or bytes, got {type(source).__name__}")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"not a JSON scenario file: {exc}") from exc
    if not isinstance(data, dict) or "schema_version" not in data:
        raise DataError("not a scenario file: expected an object with 'schema_version' and 'scenarios'")
    if data["schema_version"] != SCENARIO_SCHEMA:
        raise DataError(
            f"unsupported schema_version {data['schema_version']!r} (this version reads {SCENARIO_SCHEMA!r})"
        )
    items = data.get("scenarios")
    if not isinstance(items, list) or not items:
        raise DataError("'scenarios' must be a non-empty list")
    out = []
    for i, item in enumerate(items, start=1):
        named = isinstance(item, dict) and "name" in item
        label = f"scenario {i}" + (f" ({item['name']!r})" if named else "")
        try:
            out.append(scenario_from_dict(item))
        except DataError as exc:
            raise DataError(f"{label}: {exc}") from exc
    names = [s.name for s in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DataError(f"scenario names must be unique: {dupes} appear more than once")
    return out
