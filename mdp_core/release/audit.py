"""The audit record of a release: everything needed to check, later, what was released and how.

Fields (DESIGN.md "Release and decisions"): the dataset fingerprint (SHA-256 of the canonical CSV: the
loaded table written with a header, no index, ``,`` separators, ``\\n`` line ends, UTF-8, pandas' default
float format), rows, columns, schema, target, groups, per-group eps_k, mechanism per group, the composition
rule ``||eps||_q <= eps`` with q and the numbers, the verification of every channel (its maximum violation
recomputed here with :func:`mdp_core.mdp_violation` on the group's product metric, not copied from the
result), seed, package versions and a UTC timestamp. Every value is JSON-able (``p = inf`` is written as the
string ``"inf"``), so ``json.loads(json.dumps(record)) == record``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math
import platform
from collections.abc import Sequence
from importlib import metadata

import pandas as pd

from mdp_core.data import Encoded
from mdp_core.dephdp import DepHDPConfig, DepHDPResult
from mdp_core.errors import DataError
from mdp_core.mechanisms import VIOLATION_TOL, mdp_violation
from mdp_core.metrics import budget_norm, dual_exponent, product_distance

__all__ = [
    "AUDIT_FIELDS",
    "AUDIT_SCHEMA",
    "audit_record",
    "dataset_fingerprint",
    "mechanism_name",
    "package_versions",
    "release_scope",
]

AUDIT_SCHEMA = "mdp-lab/audit/1"

#: Top-level keys every audit record carries.
AUDIT_FIELDS: tuple[str, ...] = (
    "schema_version",
    "dataset",
    "fingerprint",
    "rows",
    "rows_released",
    "scope",
    "columns",
    "columns_released",
    "columns_excluded",
    "schema",
    "target",
    "target_released",
    "method",
    "groups",
    "composition",
    "verification",
    "config",
    "seed",
    "release_seed",
    "versions",
    "timestamp",
)

_PACKAGES = ("numpy", "scipy", "pandas", "highspy", "plotly", "streamlit")
#: The paper whose composition theorem and lower bound the record and the report cite.
PAPER = (
    "“Beyond Monolithic Perturbation: Heterogeneous Mechanism Design for Multi-Attribute Metric "
    "Differential Privacy”"
)
#: The composition rule in words, as the audit record states it.
COMPOSITION_RULE = (
    "||eps_k||_q <= eps: a record's budget is the l_q norm of its groups' budgets, q the conjugate of the "
    f"record metric's p (1/p + 1/q = 1); Theorem 1 of {PAPER}"
)


def mechanism_name(kind: str) -> str:
    """A group channel's kind as the pages name it: DepHDP's "CAL" (the exponential mechanism, remapped
    where that lowers the loss) is its DPN, distance-based noise; OPT, DPN, RMP, RR and EM stay."""
    return "DPN" if kind == "CAL" else kind


def canonical_csv(df: pd.DataFrame) -> bytes:
    """The table as canonical CSV bytes (header, no index, ``\\n`` line ends, UTF-8)."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    return df.to_csv(index=False, lineterminator="\n").encode("utf-8")


def dataset_fingerprint(df: pd.DataFrame) -> str:
    """SHA-256 (hex) of :func:`canonical_csv`: the same table gives the same fingerprint anywhere."""
    return hashlib.sha256(canonical_csv(df)).hexdigest()


def package_versions() -> dict[str, str]:
    """Versions of Python, mdp_core and the numerical packages (``"absent"`` when not installed)."""
    out = {"python": platform.python_version(), "mdp_core": _own_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def _num(x: float) -> float | str:
    x = float(x)
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")


def _config_dict(config: DepHDPConfig) -> dict:
    return {k: (_num(v) if isinstance(v, float) else v) for k, v in dataclasses.asdict(config).items()}


def audit_record(
    df: pd.DataFrame,
    encoded: Encoded,
    result: DepHDPResult,
    *,
    seed: int,
    release_seed: int | None = None,
    fresh_entropy: bool = False,
    shuffled: bool | None = None,
    dataset: str = "",
    privatised: pd.DataFrame | None = None,
    include_target: bool = True,
    target_eps: float | None = None,
    timestamp: dt.datetime | None = None,
    release_rows: str = "all",
    rows_tuning: int | None = None,
    source_rows: int | None = None,
    outside: Sequence[tuple[str, int]] = (),
) -> dict:
    """The JSON-able audit record of releasing ``df`` with ``result`` (see module docstring for fields).

    Parameters
    ----------
    df : DataFrame
        The loaded table (fingerprinted as is).
    encoded : Encoded
        Its discretisation (schema, levels, component metrics).
    result : DepHDPResult
        The configured mechanism.
    seed : int
        Seed of the split, the tuning and the utility measurement.
    release_seed : int or None
        Seed of the release's own random draws, if one was given.
    fresh_entropy : bool
        The draws came from fresh entropy, recorded nowhere (said in ``scope``; without a release seed and
        without this, the scope says nothing of the draws).
    shuffled : bool, optional
        Whether ``privatised`` is in a random order (:func:`mdp_core.release.evaluate_scenario` shuffles
        it; :func:`~mdp_core.release.privatise` keeps the table's order); said in ``scope`` when known.
    dataset : str
        Name shown in the record (sample name or file name).
    privatised : DataFrame, optional
        The release itself: its rows and columns are recorded (else those :func:`privatise` would give).
    include_target, target_eps
        As passed to :func:`mdp_core.release.privatise` (the target channel is verified here too).
    timestamp : datetime, optional
        Default: now (UTC).
    release_rows, rows_tuning
        Which records the release holds (``"all"`` or ``"held_out"``) and how many of the table's records
        tuned the channels (None: tuned on other data); stated in ``scope`` (:func:`release_scope`).
    source_rows : int, optional
        Rows of the file when ``df`` is a uniform sample of it (:attr:`mdp_core.LoadReport.original_rows`).
    outside : sequence of (str, int)
        Of a held-out release coded in the fitting records' levels: held-out values per column that were
        not among them (:attr:`mdp_core.data.HeldOutEncoding.outside`); stated in ``scope``.
    """

    from .privatise import _check_result, target_channel

    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    _check_result(encoded, result)
    mech, config = result.mechanism, result.config
    q = dual_exponent(config.p)
    groups, verification, budgets = [], [], [float(e) for e in mech.eps]
    for k, (g, kind, eps_k, P) in enumerate(
        zip(mech.groups, mech.kinds, mech.eps, mech.channels, strict=True)
    ):
        dist = product_distance([encoded.components[a] for a in g], config.p)
        violation = float(mdp_violation(P, dist, float(eps_k)))
        groups.append(
            {
                "attributes": list(g),
                "domain_size": int(P.shape[0]),
                "eps": float(eps_k),
                "selected": str(result.selection[k]),
                "mechanism": mechanism_name(str(kind)),
                "beta": float(result.surrogate.betas[k]),
            }
        )
        verification.append(_verified(" + ".join(g), violation))
    target = encoded.schema.target
    target_released = bool(include_target and target is not None)
    eps_t = None
    if include_target and target is not None:
        eps_t = float(config.eps) if target_eps is None else float(target_eps)
        P = target_channel(encoded, eps_t)
        violation = float(mdp_violation(P, encoded.components[target], eps_t))
        kind = "RR" if encoded.schema.kind(target) in ("nominal", "binary") else "EM"
        groups.append(
            {"attributes": [str(target)], "domain_size": int(P.shape[0]), "eps": eps_t, "selected": kind,
             "mechanism": kind, "beta": None}
        )  # fmt: skip
        verification.append(_verified(str(target), violation))
        budgets.append(eps_t)
    norm = budget_norm(budgets, q)
    features_norm = budget_norm([float(e) for e in mech.eps], q)
    composition = {
        "rule": COMPOSITION_RULE,
        "p": _num(config.p),
        "q": _num(q),
        "eps": float(config.eps),
        "eps_k": budgets,
        "norm_features": features_norm,
        "norm": norm,
        "holds": bool(features_norm <= float(config.eps) * (1 + 1e-12)),
        "total_with_target": norm if target_released else None,
        "statement": _composition_statement(budgets, q, norm, float(config.eps), target_released),
    }
    if privatised is not None:
        rows_released, cols_released = len(privatised), [str(c) for c in privatised.columns]
    else:
        rows_released = len(encoded.codes)
        keep = set(mech.attributes) | ({target} if target_released else set())
        cols_released = [str(c) for c in df.columns if c in keep]
    ts = (timestamp or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    record = {
        "schema_version": AUDIT_SCHEMA,
        "dataset": str(dataset),
        "fingerprint": {"algorithm": "sha256", "of": "canonical CSV", "value": dataset_fingerprint(df)},
        "rows": len(df),
        "rows_released": int(rows_released),
        "scope": release_scope(
            release_rows,
            rows_released=int(rows_released),
            rows_tuning=rows_tuning,
            sample_of=(len(df), source_rows) if source_rows is not None else None,
            outside=outside,
            undeclared=[c for c in cols_released if c not in (*encoded.ranges, *encoded.categories)],
            outside_public=encoded.outside_public,
            seeded=True if release_seed is not None else (False if fresh_entropy else None),
            shuffled=shuffled,
        )
        | {
            "public_ranges": {c: list(span) for c, span in encoded.ranges.items()},
            "public_categories": {c: list(labels) for c, labels in encoded.categories.items()},
        },
        "columns": [str(c) for c in df.columns],
        "columns_released": cols_released,
        "columns_excluded": [str(c) for c in df.columns if c not in cols_released],
        "exclusion_reasons": {str(c): str(r) for c, r in encoded.schema.excluded},
        "schema": [{"column": c, "kind": k} for c, k in encoded.schema.kinds],
        "target": target,
        "target_released": target_released,
        "method": result.method,
        "groups": groups,
        "composition": composition,
        "verification": verification,
        "config": _config_dict(config),
        "seed": int(seed),
        "release_seed": None if release_seed is None else int(release_seed),
        "versions": package_versions(),
        "timestamp": ts.isoformat(timespec="seconds"),
    }
    missing = [f for f in AUDIT_FIELDS if f not in record]
    if missing:  # pragma: no cover - guards edits of this function
        raise DataError(f"internal error: audit record lacks {missing}")
    return record


def _verified(channel: str, violation: float) -> dict:
    """A channel's verification entry: its largest excess ln P[x, y] - ln P[x', y] - eps d(x, x') over every
    pair and output, and whether it is within the stated tolerance (nats, absolute)."""
    ok = violation <= VIOLATION_TOL
    return {"channel": channel, "max_violation": _num(violation), "tolerance": VIOLATION_TOL, "verified": ok}


#: Said in the scope of a release whose domain comes from the whole table (privacy audit, stop 62).
DOMAIN_NOTE = (
    "The released values themselves (the bin centres of numeric columns without a declared public range, "
    "which lie within half a bin of each column's minimum and maximum, and the categories of columns "
    "without declared public ones) are computed from every record of the table, released ones included, "
    "and are not private: one record with an extreme or rare value can change them. The bound holds given "
    "those values; declare public ranges and categories on the Data page where that matters."
)
#: Said in the scope of a held-out release: its domain comes from the records that tuned the channels.
HELD_OUT_DOMAIN_NOTE = (
    "The released values themselves (bin centres, categories) and the column kinds are declared public or "
    "computed from the records that tuned the channels only, so no released record shapes them; a released "
    "value that is not among them is released as the nearest of them (a number beyond their range as the "
    "outermost bin centre, an unseen category as the most frequent one, or as 'other' where categories are "
    'declared, an unseen ordered level as the nearest), and the bound holds for the value so coded. "Which '
    'ε?" looks at the tuning records only too. Not covered: how the file was read (number formats and '
    "column types are decided from every row), which columns are released (the Data page's exclusions, "
    "the guard rails' included, are decided on the whole table), how many held-out records have a missing "
    "number (they are left out), and an ε chosen by looking at the released records in any other way."
)
#: Said in every release's scope: what must stay with the data holder (privacy audit, stop 63).
PUBLISH_NOTE = (
    "Publish the released table only: the audit record and the report are for the data holder. They carry "
    "the table's fingerprint (it confirms a guessed table) and statistics of the true values (utility, "
    "leakage, counts)."
)
#: Said in every release's scope: the released rows' order (privacy audit, stop 63).
ORDER_NOTE = "The records are released in a random order: the file's own order can give values away."
#: Said of a release in the table's own order.
KEPT_ORDER_NOTE = "The records are in the table's own order, which can give values away: shuffle them first."
#: Said of a release drawn with a recorded seed (``release_seed``).
SEEDED_NOTE = (
    "The release's random draws came from the recorded release seed: with it (and the channels) anyone can "
    "redo them and narrow down each record's true value, so keep the record and the scenario file private."
)
#: Said of a release drawn from fresh entropy (the default).
UNSEEDED_NOTE = (
    "The release's random draws came from fresh operating-system entropy and are recorded nowhere; "
    "preparing it again draws another release: publish one only (two releases of the same records "
    "together cost twice the budget)."
)


def _domain_note(undeclared: Sequence[str] | None) -> str:
    """:data:`DOMAIN_NOTE`, naming the columns it is about; none left: every released value is public."""
    if undeclared is None:
        return DOMAIN_NOTE
    if not undeclared:
        return (
            "The released values themselves are declared public (ranges and categories on the Data page): "
            "no record shapes them, once the file is read. How it is read is decided from every row: number "
            "formats, date formats, and the kinds of columns whose kind was not set on the Data page."
        )
    return f"{DOMAIN_NOTE} Columns without a declared domain: {', '.join(undeclared)}."


def release_scope(
    release_rows: str,
    *,
    rows_released: int,
    rows_tuning: int | None,
    sample_of: tuple[int, int] | None = None,
    outside: Sequence[tuple[str, int]] = (),
    undeclared: Sequence[str] | None = None,
    outside_public: Sequence[tuple[str, int]] = (),
    seeded: bool | None = None,
    shuffled: bool | None = None,
) -> dict:
    """Which records a release holds and what its bound covers, in plain words (the audit's ``scope``;
    ``sample_of``: (rows of the table, rows of the file) when the table is a uniform sample of a file;
    ``outside``: held-out values per column coded by the nearest-level rule; ``undeclared``: the released
    columns without a declared public domain, None when unknown; ``outside_public``: values per column
    outside their declared public domain, :attr:`mdp_core.Encoded.outside_public`; ``seeded``: whether the
    release's draws came from a recorded release seed, ``shuffled``: whether its rows are in a random order,
    None when unknown).

    A channel tuned on a record is not fixed independently of it: the choice of groups, budgets and
    remapping is computed from the raw values and is not itself private. So the channels are chosen without
    a record only for records the tuning never saw (``release_rows="held_out"``, or channels tuned on other
    data: ``rows_tuning=None``). A held-out release's domain (bin centres, categories) comes from the
    tuning records only (:data:`HELD_OUT_DOMAIN_NOTE`, :func:`mdp_core.data.encode_held_out`); otherwise
    it is computed from every record of the table, released ones included (:data:`DOMAIN_NOTE`; privacy
    audit: a record with an extreme value moved the other records' bin centres), so the bound holds given
    that domain, which is not private.
    """
    if release_rows not in ("all", "held_out"):
        raise DataError(f"release_rows must be 'all' or 'held_out', got {release_rows!r}")
    if rows_tuning is None:
        statement = (
            f"{rows_released:,} records are released, each randomised on its own through a verified channel. "
            "If the channels were tuned on other data, they were chosen without any released record; for "
            f"records they were tuned on, the tuning itself is not private. {_domain_note(undeclared)}"
        )
    elif release_rows == "all":
        statement = (
            f"All {rows_released:,} records are released, each randomised on its own through a verified "
            f"channel, but the channels (groups, budgets, remapping) were tuned on {rows_tuning:,} of these "
            "same records, and that tuning is not private: for those records the bound covers the "
            "randomisation, not what the choice of channels reveals about them. For channels chosen "
            "without the released records, release only the held-out records, or tune on a public table. "
            f"{_domain_note(undeclared)}"
        )
    else:
        statement = (
            f"Only the {rows_released:,} held-out records are released; the {rows_tuning:,} that tuned the "
            "channels are not. Each released record is randomised on its own through channels whose groups, "
            "budgets and remapping were chosen without it. The tuning (groups and budgets, listed in the "
            f"audit record) describes the held-back records and is not private. {HELD_OUT_DOMAIN_NOTE}"
        )
        if outside:
            moved = ", ".join(f"{c} ({n:,})" for c, n in outside)
            statement += f" Values released as the nearest level, per column: {moved}."
    if outside_public:
        moved = ", ".join(f"{c} ({n:,})" for c, n in outside_public)
        statement += (
            " Values of the table outside their declared public domain (a number set to its range's nearer "
            f"end, a category released as 'other'), per column: {moved}."
        )
    draws = "" if seeded is None else f" {SEEDED_NOTE if seeded else UNSEEDED_NOTE}"
    order = {True: f" {ORDER_NOTE}", False: f" {KEPT_ORDER_NOTE}", None: ""}[shuffled]
    statement = f"{statement}{order} {PUBLISH_NOTE}{draws}"
    if sample_of is not None:
        statement = (
            f"The table is a uniform random sample of {sample_of[0]:,} of the file's {sample_of[1]:,} rows: "
            f"the other {sample_of[1] - sample_of[0]:,} are not released. {statement}"
        )
    return {
        "release_rows": release_rows,
        "rows_tuning": rows_tuning,
        "rows_in_source": None if sample_of is None else sample_of[1],
        "outside_domain": {str(c): int(n) for c, n in outside},
        "outside_public_domain": {str(c): int(n) for c, n in outside_public},
        "statement": statement,
    }


def _composition_statement(budgets: list[float], q: float, norm: float, eps: float, with_target: bool) -> str:
    qs = "∞" if math.isinf(q) else f"{q:g}"
    terms = ", ".join(f"{e:.3g}" for e in budgets)
    head = f"||({terms})||_{qs} = {norm:.4g}"
    if with_target:
        return (
            f"{head}: the record budget of this release, the target's own channel included "
            f"(the {len(budgets) - 1} feature groups use at most ε = {eps:g})."
        )
    return f"{head} ≤ ε = {eps:g}"


def _own_version() -> str:
    """mdp_core's version from the installed distribution (no import of the package that re-exports us)."""
    try:
        return metadata.version("mdp-lab")
    except metadata.PackageNotFoundError:
        return "0.1.0"
