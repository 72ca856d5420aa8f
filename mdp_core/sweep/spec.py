"""The sweep specification: which dataset, tasks, budgets, thresholds, methods and repetitions to run.

A :class:`SweepSpec` is frozen (a cache key), validated on construction with errors that name the field,
and round-trips through JSON (:meth:`SweepSpec.to_json` / :meth:`SweepSpec.from_json`). Its
:meth:`~SweepSpec.configurations` are the product ``task x tau_group x tau_dpn x eps`` in a fixed order;
the position in that order is the configuration's *task index*, which together with the seed fixes every
random draw of the configuration (so results do not depend on where or in which order tasks run).

The spec fixes the inputs, not the code that computes with them: :data:`CODE_VERSION` names the mdp_core
sources a process loaded, and a spec may record it (``code``) so that a run by other code can say so.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

from mdp_core.data.encoding import KINDS
from mdp_core.data.public import is_label_list, is_span
from mdp_core.dephdp import METHODS_EVALUATED, TASKS, DepHDPConfig
from mdp_core.errors import DataError

__all__ = [
    "CODE_VERSION",
    "SPEC_VERSION",
    "SWEEP_OWN_FIELDS",
    "Configuration",
    "SweepSpec",
    "code_version",
    "loaded_code_version",
    "settings_key",
]

SPEC_VERSION = 1
#: OPT LP budget per profile grid point in sweeps (seconds; the LP solver's default): see SweepSpec.config.
SWEEP_OPT_SECONDS_PER_POINT = 600.0

#: DepHDPConfig fields a spec sets itself (so they cannot appear in ``options``).
SWEEP_OWN_FIELDS = frozenset({"eps", "task", "tau_group", "tau_dpn", "p", "score", "seed"})
_OPTION_FIELDS = {f.name for f in fields(DepHDPConfig)} - SWEEP_OWN_FIELDS
MAX_CONFIGURATIONS = 100_000

_PACKAGE = Path(__file__).resolve().parents[1]  # mdp_core
_DISK_LOCK = threading.Lock()
_DISK: list[tuple[tuple[tuple[str, int, int], ...], str]] = []  # (the sources' stats, their hash)


def code_version() -> str:
    """The mdp_core sources on disk now: 12 hex digits of the SHA-256 of every ``.py`` file (path and
    content). Rehashed only when a file's size or modification time changed (a page calls it every run).

    A page and ``python -m mdp_core.sweep`` gave other numbers for the same spec: the app had loaded the
    code before a commit changed the allocation, the CLI loaded it after (SPL+DPN, eps 0.5: 0.509 vs 0.500).
    """
    paths = sorted(_PACKAGE.rglob("*.py"))
    stats = tuple((p.relative_to(_PACKAGE).as_posix(), *_stat(p)) for p in paths)
    with _DISK_LOCK:
        if _DISK and _DISK[0][0] == stats:
            return _DISK[0][1]
    digest = hashlib.sha256()
    for (name, _, _), path in zip(stats, paths, strict=True):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    version = digest.hexdigest()[:12]
    with _DISK_LOCK:
        _DISK[:] = [(stats, version)]
    return version


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


#: The mdp_core sources as this process loaded them (hashed when this module is imported: a Streamlit app
#: that re-imports the changed core re-imports this module too). A Dask worker started earlier keeps its own.
CODE_VERSION = code_version()


def loaded_code_version() -> str:
    """:data:`CODE_VERSION` of the process that runs this (``client.run(loaded_code_version)`` asks each
    Dask worker which code it loaded)."""
    return CODE_VERSION


class Configuration(NamedTuple):
    """One point of the sweep grid; ``index`` is its task index (position in the spec's product order)."""

    index: int  # type: ignore[assignment]  # the task index, shadowing tuple.index on purpose
    task: str
    tau_group: float
    tau_dpn: float
    eps: float


def settings_key(c: Configuration) -> int:
    """A 64-bit integer of the configuration's settings (not of its position in the grid)."""
    text = "|".join([c.task, *(float(v).hex() for v in (c.tau_group, c.tau_dpn, c.eps))])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _floats(value: object, name: str, *, lo: float, hi: float, lo_open: bool) -> tuple[float, ...]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of numbers, got {type(value).__name__}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name} must hold numbers, got {v!r}")
        x = float(v)
        if not math.isfinite(x) or x < lo or x > hi or (lo_open and x == lo):
            bound = f"({lo:g}, {hi:g}]" if lo_open else f"[{lo:g}, {hi:g}]"
            raise DataError(f"every {name} value must lie in {bound}, got {v!r}")
        out.append(x)
    if not out:
        raise DataError(f"{name} must not be empty")
    if len(set(out)) != len(out):
        raise DataError(f"{name} has duplicate values: {sorted(out)}")
    return tuple(sorted(out))


def _pairs(value: object, name: str, ok: Callable[[object], bool], what: str) -> tuple[tuple[str, Any], ...]:
    """A mapping (or pairs) column -> value as sorted pairs, every value passing ``ok``."""
    try:
        items = dict(value.items() if isinstance(value, Mapping) else value)  # type: ignore[call-overload]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must map column names to {what}, got {value!r}") from exc
    bad = {k: v for k, v in items.items() if not isinstance(k, str) or not ok(v)}
    if bad:
        raise DataError(f"{name} must map column names to {what}, got {bad}")
    return tuple(sorted(items.items()))


def _is_inclusion(value: object) -> bool:
    return value is None or value in (*KINDS, "month", "year", "hour")


def _is_bin_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 2


def _names(value: object, name: str, allowed: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{name} must be a name or a list of names, got {value!r}")
    bad = [v for v in value if v not in allowed]
    if bad:
        raise DataError(f"unknown {name} {bad}: choose from {list(allowed)}")
    if not value:
        raise DataError(f"{name} must not be empty")
    if len(set(value)) != len(value):
        raise DataError(f"{name} has duplicates: {list(value)}")
    return tuple(v for v in allowed if v in value)  # canonical order


@dataclass(frozen=True)
class SweepSpec:
    """A privacy-utility sweep (DESIGN.md "Sweeps at scale").

    Attributes
    ----------
    dataset : str
        An embedded sample name (``"heart"``, ``"adult"``, ``"wine"``) or a path to a CSV/TSV file.
    task : str or tuple of str
        One task name or several (keys of :data:`mdp_core.TASKS`); stored as given for one task, as a
        tuple in canonical order for several. :attr:`tasks` is always a tuple.
    eps : tuple of float
        Global budgets (record metric ``d_p``), > 0; stored sorted.
    tau_group, tau_dpn : tuple of float
        Grouping and DPN-adequacy thresholds in [0, 1]; stored sorted.
    methods : tuple of str
        Any of ``"DepHDP"`` and the baselines ``"SPL+DPN"``, ``"SPL+RMP"``, ``"ALC+DPN"``, ``"ALC+RMP"``.
    repetitions : int
        Privatisations of the held-out split per configuration and method (>= 2, for a CI).
    seed : int
        Seeds the fitting / test split, the DepHDP samples and, with the task index, every privatisation.
    target : str or None
        Target column (prediction task); ``None``: an embedded sample's documented target.
    fit_fraction : float
        Share of rows used for configuration (000 Sec. IV-A: 62.5 %); the rest is the held-out test split.
    p : float
        Record metric exponent (``>= 1``; ``math.inf`` is written as the string ``"inf"`` in JSON).
    score : {"radial", "mse"}
        Adequacy score of the DPN/OPT selection.
    bins : int
        Bins per numeric attribute (:func:`mdp_core.discretize`).
    options : tuple of (str, value)
        Further :class:`mdp_core.DepHDPConfig` fields (e.g. ``grid_points``, ``opt_max_domain``), as given
        in JSON (a mapping); stored as sorted pairs so the spec stays hashable.
    include, exclude, kind_overrides, column_bins, column_ranges, column_categories
        The Data page's choices (:func:`mdp_core.encode_table`): columns re-included (column -> kind, a
        date's ``"month"``/``"year"``, or None), columns left out, kind overrides, per-column bin counts
        (others get ``bins``), declared public ranges ``[lo, hi]`` of numeric columns and public
        categories of the others; mappings in JSON, sorted pairs here.
    code : str or None
        The :data:`CODE_VERSION` of the code the spec was written for (the app records its own), None if
        unknown. Not an input of the sweep: ``python -m mdp_core.sweep`` warns when it runs other code,
        whose numbers can differ.
    """

    dataset: str
    task: str | tuple[str, ...] = "prediction"
    eps: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0)
    tau_group: tuple[float, ...] = (0.1,)
    tau_dpn: tuple[float, ...] = (0.2,)
    methods: tuple[str, ...] = METHODS_EVALUATED
    repetitions: int = 5
    seed: int = 0
    target: str | None = None
    fit_fraction: float = 0.625
    p: float = 2.0
    score: str = "radial"
    bins: int = 8
    options: tuple[tuple[str, Any], ...] = ()
    include: tuple[tuple[str, str | None], ...] = ()
    exclude: tuple[str, ...] = ()
    kind_overrides: tuple[tuple[str, str], ...] = ()
    column_bins: tuple[tuple[str, int], ...] = ()
    column_ranges: tuple[tuple[str, tuple[float, float]], ...] = ()
    column_categories: tuple[tuple[str, tuple[str, ...]], ...] = ()
    code: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset.strip():
            raise DataError("dataset must be an embedded sample name or a file path")
        tasks = _names(self.task, "task", list(TASKS))
        set_ = object.__setattr__
        set_(self, "task", tasks[0] if len(tasks) == 1 else tasks)
        set_(self, "eps", _floats(self.eps, "eps", lo=0.0, hi=1e6, lo_open=True))
        set_(self, "tau_group", _floats(self.tau_group, "tau_group", lo=0.0, hi=1.0, lo_open=False))
        set_(self, "tau_dpn", _floats(self.tau_dpn, "tau_dpn", lo=0.0, hi=1.0, lo_open=False))
        set_(self, "methods", _names(self.methods, "methods", METHODS_EVALUATED))
        for name in ("repetitions", "seed", "bins"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an integer, got {value!r}")
        if self.repetitions < 2:
            raise DataError(
                f"repetitions must be >= 2 (a confidence interval needs two), got {self.repetitions}"
            )
        if self.seed < 0:
            raise DataError(f"seed must be >= 0, got {self.seed}")
        if self.bins < 2:
            raise DataError(f"bins must be >= 2, got {self.bins}")
        if self.target is not None and not isinstance(self.target, str):
            raise TypeError(f"target must be a column name or None, got {self.target!r}")
        if isinstance(self.fit_fraction, bool) or not isinstance(self.fit_fraction, (int, float)):
            raise TypeError(f"fit_fraction must be a number, got {self.fit_fraction!r}")
        if not 0.0 < float(self.fit_fraction) < 1.0:
            raise DataError(f"fit_fraction must lie in (0, 1), got {self.fit_fraction!r}")
        p = float("inf") if self.p in ("inf", "Infinity") else self.p
        if isinstance(p, bool) or not isinstance(p, (int, float)) or math.isnan(p) or p < 1:
            raise DataError(f"p must be a number >= 1 or inf, got {self.p!r}")
        set_(self, "p", float(p))
        if self.score not in ("radial", "mse"):
            raise DataError(f"score must be 'radial' or 'mse', got {self.score!r}")
        try:
            opts = dict(self.options)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"options must be a mapping of DepHDPConfig fields, got {self.options!r}"
            ) from exc
        bad = sorted(set(opts) - _OPTION_FIELDS)
        if bad:
            raise DataError(f"unknown options {bad}: allowed are {sorted(_OPTION_FIELDS)}")
        set_(self, "options", tuple(sorted(opts.items())))
        set_(self, "include", _pairs(self.include, "include", _is_inclusion, "a kind, a date part or null"))
        if isinstance(self.exclude, str) or not all(isinstance(c, str) for c in self.exclude):
            raise TypeError(f"exclude must be a list of column names, got {self.exclude!r}")
        set_(self, "exclude", tuple(self.exclude))
        set_(
            self, "kind_overrides", _pairs(self.kind_overrides, "kind_overrides", KINDS.__contains__, "kinds")
        )
        set_(self, "column_bins", _pairs(self.column_bins, "column_bins", _is_bin_count, "integers >= 2"))
        spans = _pairs(self.column_ranges, "column_ranges", is_span, "[lo, hi] with finite lo < hi")
        set_(self, "column_ranges", tuple((c, (float(lo), float(hi))) for c, (lo, hi) in spans))
        lists = _pairs(
            self.column_categories, "column_categories", is_label_list, "non-empty lists of labels"
        )
        set_(self, "column_categories", tuple((c, tuple(labels)) for c, labels in lists))
        if self.code is not None and (not isinstance(self.code, str) or not self.code.strip()):
            raise TypeError(f"code must be a code version (a non-empty string) or None, got {self.code!r}")
        n = self.n_configurations
        if n > MAX_CONFIGURATIONS:
            raise DataError(
                f"{n:,} configurations exceed the limit of {MAX_CONFIGURATIONS:,}; use coarser grids"
            )
        # every configuration must be a valid DepHDPConfig: fail here, not on a worker
        for t, tg, td in itertools.product(self.tasks, self.tau_group, self.tau_dpn):
            try:
                self.config(Configuration(0, t, tg, td, self.eps[0]))
            except (TypeError, ValueError) as exc:
                raise DataError(f"invalid options for DepHDPConfig: {exc}") from exc

    # ------------------------------------------------------------------ derived

    @property
    def tasks(self) -> tuple[str, ...]:
        """The task names as a tuple (one or more)."""
        return (self.task,) if isinstance(self.task, str) else tuple(self.task)

    @property
    def n_configurations(self) -> int:
        return len(self.tasks) * len(self.tau_group) * len(self.tau_dpn) * len(self.eps)

    @property
    def n_rows(self) -> int:
        """Rows of the tidy result: configurations x methods x repetitions."""
        return self.n_configurations * len(self.methods) * self.repetitions

    def configurations(self) -> list[Configuration]:
        """Every configuration in task-index order (task, tau_group, tau_dpn, eps; eps varies fastest)."""
        grid = itertools.product(self.tasks, self.tau_group, self.tau_dpn, self.eps)
        return [Configuration(i, *c) for i, c in enumerate(grid)]

    def config(self, c: Configuration) -> DepHDPConfig:
        """The :class:`~mdp_core.DepHDPConfig` of one configuration.

        Unless ``options`` sets ``opt_seconds``, the OPT profile LPs get 600 s per grid point (the LP
        solver's own default) instead of the page's wall-clock budget: a budget that runs out keeps EM +
        remap at that point, so under load a worker and the serial run would build different channels.
        A sweep's results must not depend on the machine's load or the number of workers.
        """
        options = dict(self.options)
        if "opt_seconds" in {f.name for f in fields(DepHDPConfig)} and "opt_seconds" not in options:
            points = int(options.get("grid_points", DepHDPConfig.grid_points))
            options["opt_seconds"] = SWEEP_OPT_SECONDS_PER_POINT * points
        return DepHDPConfig(
            eps=c.eps,
            task=c.task,
            tau_group=c.tau_group,
            tau_dpn=c.tau_dpn,
            p=self.p,
            score=self.score,  # type: ignore[arg-type]
            seed=self.seed,
            **options,
        )

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict with a ``"version"`` key (``p = inf`` as ``"inf"``)."""
        return {
            "version": SPEC_VERSION,
            "dataset": self.dataset,
            "task": self.task if isinstance(self.task, str) else list(self.task),
            "eps": list(self.eps),
            "tau_group": list(self.tau_group),
            "tau_dpn": list(self.tau_dpn),
            "methods": list(self.methods),
            "repetitions": self.repetitions,
            "seed": self.seed,
            "target": self.target,
            "fit_fraction": float(self.fit_fraction),
            "p": "inf" if math.isinf(self.p) else self.p,
            "score": self.score,
            "bins": self.bins,
            "options": dict(self.options),
            "include": dict(self.include),
            "exclude": list(self.exclude),
            "kind_overrides": dict(self.kind_overrides),
            "column_bins": dict(self.column_bins),
            "column_ranges": {c: list(span) for c, span in self.column_ranges},
            "column_categories": {c: list(labels) for c, labels in self.column_categories},
            "code": self.code,
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepSpec:
        """Build from :meth:`to_dict` output (unknown keys and newer versions are rejected by name)."""
        if not isinstance(data, Mapping):
            raise DataError(f"a sweep spec must be a JSON object, got {type(data).__name__}")
        data = dict(data)
        version = data.pop("version", SPEC_VERSION)
        if version != SPEC_VERSION:
            raise DataError(f"unsupported sweep spec version {version!r} (this build reads {SPEC_VERSION})")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DataError(f"unknown sweep spec keys {unknown}: expected some of {sorted(known)}")
        if "dataset" not in data:
            raise DataError("a sweep spec needs a 'dataset'")
        for key in ("eps", "tau_group", "tau_dpn", "methods"):
            if isinstance(data.get(key), list):
                data[key] = tuple(data[key])
        if isinstance(data.get("task"), list):
            data["task"] = tuple(data["task"])
        opts = data.get("options", {})
        if not isinstance(opts, Mapping):
            raise DataError("options must be a JSON object")
        data["options"] = tuple(sorted(opts.items()))
        return cls(**data)

    @classmethod
    def from_json(cls, text: str | bytes) -> SweepSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"the sweep spec is not valid JSON: {exc}") from exc
        return cls.from_dict(data)
