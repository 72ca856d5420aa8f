"""Sweep & frontier page glue: the engine (one embedded Dask cluster per app process), a locked results store,
the time estimate, the frontier figure and the Pareto table."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import dask
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import mdp_core as core
from mdp_core._figures import log_axis
from mdp_core.sweep import default_client, describe_engine, frontier
from mdp_core.sweep.cluster import running_client, start_default_client, worker_code
from mdp_core.sweep.spec import CODE_VERSION, code_version
from ui.data import encoding_choices
from ui.jobs import builder
from ui.state import get_state
from ui.store import store

__all__ = [
    "ENGINES",
    "PARETO_HEADERS",
    "WAIT_SECONDS",
    "chance_level",
    "chance_note",
    "code_note",
    "encoding_fields",
    "engine",
    "engine_getter",
    "eps_values",
    "estimate_seconds",
    "fresh_client",
    "frontier_figure",
    "pareto_table",
    "parquet_bytes",
    "prestart",
    "request_run",
    "size_text",
    "stored",
    "sweep_key",
]


#: The run that starts a sweep shows its progress this long (seconds) before the page's poll takes over.
WAIT_SECONDS = 2.0
ENGINES = {
    "dask": "Dask (DASK_SCHEDULER_ADDRESS, else an embedded local cluster)",
    "serial": "In this process (small sweeps)",
}
#: Measured on the 2-core machine (UX audit, in process, 5 budgets x 5 methods x 5 repetitions): heart
#: 0.6-1.1 s and adult 2.6-7.7 s over the five tasks, where the earlier constants (7 s + 1 ms per fitting
#: row, 0.4 s per configuration, 4e-7 s per privatised cell) estimated 9.5 s and 54 s. Stage 1 (profiles)
#: per task and tau_group ~ 1.5 s + 0.1 ms per fitting row; a configuration ~ 0.1 s plus the
#: privatisations (adult, 2 -> 20 repetitions: +1.2 s for 50 M cells); kept on the high side of the runs.
_STAGE1_S, _STAGE1_PER_ROW, _CONFIG_S, _PRIV_PER_CELL = 1.5, 1e-4, 0.1, 5e-8
#: ... + 1.3 ms x columns²: a 500-row upload took 2 s with 20 columns, 8 s with 80 and
#: 117 s with 300 (record task, five methods, 2 x 2 repetitions), estimated at 8 s without this term.
_STAGE1_PER_COLUMN2 = 1.3e-3


class _Engine:
    """Holds the app process's Dask client, started on first use (a Client is awaitable, so it cannot be the
    value of ``st.cache_resource`` itself)."""

    def __init__(self) -> None:
        self.lock, self.client = threading.Lock(), None
        self.starting: threading.Thread | None = None

    def get(self) -> Any:
        with self.lock:
            if self.client is None or self.client.status != "running":
                self.client = default_client()
            return self.client


@st.cache_resource
def _engine() -> _Engine:
    # once per app process: reruns and sessions reuse it (no second cluster, no port in use)
    return _Engine()


#: Start the Dask engine in the background when a page that uses it opens (off the first run's critical
#: path: an embedded cluster takes 10-25 s to start on the shared 2-core machine). Tests switch it off.
PRESTART = True


def prestart() -> None:
    """Start the app process's Dask engine in a background thread, once (no Streamlit call in that thread;
    :func:`engine` and :func:`mdp_core.sweep.default_client` wait for it and reuse its client)."""
    if not PRESTART:
        return
    holder = _engine()
    with holder.lock:
        if holder.client is None and holder.starting is None:
            holder.starting = start_default_client()


def engine(kind: str) -> tuple[Any, str, int]:
    """``(client, where, workers)`` for ``kind``: ``client`` is ``False`` in-process and ``None`` while the
    Dask engine is not connected (a page run never connects: the run's job does, :func:`engine_getter`);
    ``where`` is the one line shown."""
    if kind != "dask":
        return False, describe_engine(False), 1
    holder = _engine()
    held = holder.client if holder.client is not None and holder.client.status == "running" else None
    client = held or running_client()
    if client is None:  # not connected: said, never waited for in a page run
        address = dask.config.get("scheduler-address", None)
        where = f"cluster at {address}" if address else f"embedded LocalCluster ({os.cpu_count()} workers)"
        if holder.starting is not None and holder.starting.is_alive():
            when = "starting in the background"
        elif holder.starting is not None or holder.client is not None:
            when = "not connected (the run's error says why; each run tries again)"
        else:
            when = "started on the first run"
        return None, f"{where}, {when}", int(os.cpu_count() or 1)
    return client, describe_engine(client), max(len(client.scheduler_info().get("workers", {})), 1)


def engine_getter(code: str = CODE_VERSION) -> Callable[[], Any]:
    """What a background job calls to get (and, the first time, start) the app process's Dask client, so
    a page run never waits for the cluster's start-up (9-23 s under load, measured by a random walk); its
    workers run ``code`` (:func:`fresh_client`)."""
    holder = _engine()
    return lambda: fresh_client(holder, code)


def fresh_client(holder: Any, code: str) -> Any:
    """``holder``'s client once every worker has loaded the mdp_core code ``code`` (the app's).

    Streamlit re-imports the core when its files change, but the embedded cluster's worker processes keep
    the code they started with: the page's sweeps ran the old code there while ``python -m mdp_core.sweep``
    on the downloaded spec ran the new one (heart, SPL+DPN at eps 0.5: 0.509 on the page, 0.500 from the
    CLI). An embedded cluster is restarted once; a cluster the app did not start is refused, naming both."""
    client = holder.get()
    for attempt in range(2):
        other = sorted(set(worker_code(client).values()) - {code})
        if not other:
            return client
        if attempt or client.cluster is None:
            break
        cluster = client.cluster
        with holder.lock:
            if holder.client is client:  # not yet restarted by another session's sweep
                holder.client = None
                client.close()
                cluster.close()
            if holder.client is None:
                # this module's default_client: ``holder`` may be an _Engine of the module before the
                # re-import, whose start-up passes the old module's functions to the new workers
                holder.client = default_client()
            client = holder.client
    if client.cluster is not None:
        raise core.DataError(
            f"the restarted Dask workers load other mdp_core code ({', '.join(other)}) than this app runs "
            f"({code}): the core changed on disk since the app started. Restart the app, or choose the "
            "in-process engine"
        )
    raise core.DataError(
        f"the Dask workers run other mdp_core code ({', '.join(other)}) than this app ({code}), so their "
        "numbers would not be this code's. Restart them with this code, or choose the in-process engine"
    )


def code_note(loaded: str = CODE_VERSION) -> tuple[str, bool]:
    """What the sweep spec download says about the code, and whether it is a warning: the version the spec
    names, with which the CLI gives these numbers; or that the core on disk is no longer the code this app
    loaded (the CLI runs the code on disk, the spec cannot carry the loaded code)."""
    disk = code_version()
    if disk == loaded:
        text = (
            f"The spec names the core's code version ({loaded}): `python -m mdp_core.sweep` on it gives "
            "these numbers with that code, and warns when it runs other code."
        )
        return text, False
    text = (
        f"The core's code changed on disk since this app loaded it ({loaded}, now {disk}): these numbers "
        "come from the loaded code, while `python -m mdp_core.sweep` on the downloaded spec runs the code on "
        "disk, whose numbers can differ. Restart the app to sweep with the code on disk."
    )
    return text, True


def encoding_fields(schema: core.Schema) -> dict[str, Any]:
    """The Data page's choices as :class:`~mdp_core.SweepSpec` fields, so a spec rebuilds the app's table."""
    choices = encoding_choices(schema)
    return {
        "include": choices["include"],
        "exclude": choices["exclude"],
        "kind_overrides": choices["kind_overrides"],
        "column_bins": choices["bins"],
        "column_ranges": tuple((c, (lo, hi)) for c, lo, hi in choices["ranges"]),
        "column_categories": choices["categories"],
        "bins": get_state().default_bins,
    }


def eps_values(lo: float, hi: float, n: int) -> list[float]:
    """``n`` log-spaced budgets from ``lo`` to ``hi``, rounded to 3 significant digits."""
    raw = np.geomspace(lo, hi, n) if n > 1 else np.array([lo])
    return sorted({float(f"{v:.3g}") for v in raw})


def size_text(spec: core.SweepSpec, seconds: float) -> str:
    """How big a sweep is, in words whose counts multiply to its rows. (It said "5 tasks (configurations)"
    beside a Tasks box holding one task.)"""

    def count(n: int, one: str, many: str) -> str:
        return f"{n} {one if n == 1 else many}"

    parts = [
        count(len(spec.eps), "budget", "budgets"),
        count(len(spec.tasks), "task", "tasks"),
        count(len(spec.tau_group), "τ_group", "τ_group values"),
        count(len(spec.tau_dpn), "τ_dpn", "τ_dpn values"),
    ]
    return (
        f"**{count(spec.n_configurations, 'configuration', 'configurations')}** ({' × '.join(parts)}) × "
        f"{count(len(spec.methods), 'method', 'methods')} × "
        f"{count(spec.repetitions, 'repetition', 'repetitions')} → {spec.n_rows:,} rows; estimated ≈ "
        f"{seconds:,.0f} s. Budgets: {', '.join(f'{e:g}' for e in spec.eps)}."
    )


def estimate_seconds(spec: core.SweepSpec, n_rows: int, n_columns: int, workers: int) -> float:
    """Rough wall-clock seconds of ``spec`` on ``workers`` workers (stage 1 is parallel across its keys)."""
    fit = spec.fit_fraction * n_rows
    one = _STAGE1_S + _STAGE1_PER_ROW * fit + _STAGE1_PER_COLUMN2 * n_columns**2
    stage1 = len(spec.tasks) * len(spec.tau_group) * one
    per_config = (
        _CONFIG_S + _PRIV_PER_CELL * (n_rows - fit) * n_columns * len(spec.methods) * spec.repetitions
    )
    w = max(int(workers), 1)
    return stage1 / min(w, len(spec.tasks) * len(spec.tau_group)) + spec.n_configurations * per_config / w


def stored(spec: core.SweepSpec, encoded: core.Encoded) -> pd.DataFrame | None:
    """The results of ``spec`` on ``encoded`` if this app process has run it."""
    return store().get(sweep_key(spec, encoded))


def request_run(spec: core.SweepSpec, encoded: core.Encoded, kind: str) -> Future[pd.DataFrame]:
    """The sweep on the builder's long-job threads, kept under :func:`sweep_key`: the page shows its progress
    and a stop button and stays usable meanwhile (a 300-column upload's sweep held one page run for 165 s).
    A stop raises out of ``progress``, which cancels the remaining tasks; the Dask engine is started in the
    job, never in a page run."""
    get_client = engine_getter(spec.code or CODE_VERSION) if kind == "dask" else (lambda: False)
    return builder().request(
        sweep_key(spec, encoded),
        lambda progress: core.run_sweep(spec, client=get_client(), progress=progress, encoded=encoded),
        slow=True,
    )


def sweep_key(spec: core.SweepSpec, encoded: core.Encoded) -> tuple[str, str, str]:
    """Store and job key of ``spec``'s results on ``encoded``."""
    return ("sweep", encoded.fingerprint, spec.to_json())


def chance_level(results: pd.DataFrame, task: str) -> float | None:
    """Held-out accuracy of always predicting the most frequent class (prediction task), else None: the
    floor an accuracy means nothing below (adult: 0.758, which three methods scored at every budget).
    Recorded by the sweep (``attrs["majority_rate"]``), not measured again in the page."""
    if task != "prediction":
        return None
    return results.attrs.get("majority_rate")


def _shown(fr: pd.DataFrame, task: str, tau_group: float, tau_dpn: float) -> pd.DataFrame:
    return fr[(fr.task == task) & (fr.tau_group == tau_group) & (fr.tau_dpn == tau_dpn)]


def chance_note(fr: pd.DataFrame, task: str, tau_group: float, tau_dpn: float, chance: float | None) -> str:
    """Which methods score no better than the majority class, and where, in words ('' if none or no
    accuracy)."""
    sub = _shown(fr, task, tau_group, tau_dpn)
    if chance is None or sub.empty or str(sub["metric"].iloc[0]) != "accuracy":
        return ""
    by_where: dict[str, list[str]] = {}
    shown = 0
    for method in core.METHODS_EVALUATED:
        m = sub[sub.method == method].sort_values("eps")
        shown += not m.empty
        low = m[m["utility_mean"] <= chance + core.MAJORITY_TOLERANCE]
        if m.empty or low.empty:
            continue
        where = (
            "at every budget shown"
            if len(low) == len(m)
            else "at ε = " + ", ".join(f"{e:g}" for e in low.eps)
        )
        by_where.setdefault(where, []).append(method)
    text = f"Always predicting the most frequent class scores {chance:.3f} on the held-out records (dashed "
    text += "line)."
    if list(by_where) == ["at every budget shown"] and len(by_where["at every budget shown"]) == shown:
        return text + (
            " No method beats it at any budget shown: at these budgets the released table carries nothing "
            "this prediction can use. Raise ε."
        )
    if by_where:
        parts = [f"{', '.join(methods)} {where}" for where, methods in by_where.items()]
        text += (
            " No better than that: " + "; ".join(parts) + ". There the released table carries nothing this "
            "prediction can use: raise ε or choose another method."
        )
    return text


def frontier_figure(
    fr: pd.DataFrame, task: str, tau_group: float, tau_dpn: float, chance: float | None = None
) -> go.Figure:
    """Held-out utility vs eps (log axis labelled by round budgets): mean and 95 % CI per method; with
    ``chance``, a dashed line at the majority-class accuracy."""
    sub = _shown(fr, task, tau_group, tau_dpn)
    fig = go.Figure()
    for method in core.METHODS_EVALUATED:
        m = sub[sub.method == method].sort_values("eps")
        if m.empty:
            continue
        fig.add_trace(
            go.Scatter(
                x=m["eps"],
                y=m["utility_mean"],
                mode="lines+markers",
                name=method,
                line={"width": 3 if method == "DepHDP" else 1.5, "color": core.METHOD_COLORS.get(method)},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": m["utility_ci_hi"] - m["utility_mean"],
                    "arrayminus": m["utility_mean"] - m["utility_ci_lo"],
                },
            )
        )
    if not sub.empty and bool(sub["higher_is_better"].iloc[0]) and sub["reference_mean"].iloc[0] > 0:
        fig.add_hline(
            y=float(sub["reference_mean"].iloc[0]), line_dash="dot", annotation_text="non-private reference"
        )
    metric = str(sub["metric"].iloc[0]) if not sub.empty else "utility"
    if chance is not None and metric == "accuracy":
        fig.add_hline(
            y=chance,
            line_dash="dash",
            line_color="#7f7f7f",
            annotation_text="always the most frequent class",
            annotation_position="bottom right",
        )
    fig.update_layout(
        xaxis={"title": "privacy budget ε", **log_axis(float(fr["eps"].min()), float(fr["eps"].max()))},
        yaxis={"title": f"held-out {metric.replace('_', ' ')} (mean, 95 % CI)"},
        height=460,
        margin={"t": 60, "b": 40},
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},  # above: clear of the ε title
    )
    return fig


#: Readable headers of the Pareto table (the frontier's own column names are code).
PARETO_HEADERS = {
    "eps": "ε",
    "tau_group": "τ_group",
    "tau_dpn": "τ_dpn",
    "utility_mean": "utility",
    "utility_ci_lo": "CI low",
    "utility_ci_hi": "CI high",
}


def pareto_table(fr: pd.DataFrame, task: str) -> pd.DataFrame:
    """The Pareto-optimal points of ``task``: budget, method, settings, utility with its CI."""
    sub = fr[(fr.task == task) & fr.pareto].sort_values(["eps", "method"])
    out = sub[
        ["eps", "method", "tau_group", "tau_dpn", "metric", "utility_mean", "utility_ci_lo", "utility_ci_hi"]
    ]
    return out.rename(columns=PARETO_HEADERS).reset_index(drop=True)


def parquet_bytes(results: pd.DataFrame) -> bytes:
    clean = results.copy()
    clean.attrs = {}
    buffer = io.BytesIO()
    clean.to_parquet(buffer, index=False, engine="pyarrow")
    return buffer.getvalue()


def frontier_of(results: pd.DataFrame) -> pd.DataFrame:
    return frontier(results)
