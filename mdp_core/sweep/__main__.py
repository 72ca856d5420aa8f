"""``python -m mdp_core.sweep SPEC.json --out RESULTS.parquet [--scheduler ADDRESS] [--serial] [--json]``.

Runs the sweep of a JSON spec (see :class:`mdp_core.sweep.SweepSpec`) and writes the tidy results as
Parquet (``.parquet``, via pyarrow) or CSV (``.csv``). Without ``--scheduler`` the engine is Dask's
``DASK_SCHEDULER_ADDRESS`` when set, else an embedded LocalCluster; ``--serial`` runs in-process. With
``--json`` the last line printed is one JSON object: ``tasks``, ``rows``, ``seconds``, ``workers``,
``engine``, ``out``, ``code`` (this run's :data:`~mdp_core.sweep.spec.CODE_VERSION`).

A spec that records the code it was written for (``code``, as the app's download does) and meets other
code here gets a warning: the same spec then need not give the same numbers. Dask workers that loaded other
code than this command are refused (each task's numbers would depend on the worker that ran it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mdp_core.errors import DataError
from mdp_core.sweep.cluster import check_worker_code
from mdp_core.sweep.engine import default_client, describe_engine, run_sweep
from mdp_core.sweep.spec import CODE_VERSION, SweepSpec

#: Seconds to reach a scheduler (Dask's default, 30 s, made a wrong address wait half a minute).
_CONNECT_SECONDS = 10


def other_code_warning(spec: SweepSpec) -> str:
    """Why this run may not reproduce the numbers of the code that wrote ``spec`` ('' when it is that code
    or the spec does not say)."""
    if spec.code is None or spec.code == CODE_VERSION:
        return ""
    return (
        f"warning: the spec was written by mdp_core code {spec.code} and this is {CODE_VERSION}: the results "
        "can differ from the ones that code gave (the app's page); run the spec with the code that wrote it, "
        "or run the sweep on the page again"
    )


def _write(df: object, out: Path) -> None:
    import pandas as pd

    assert isinstance(df, pd.DataFrame)
    clean = df.copy()
    clean.attrs = {}
    if out.suffix == ".csv":
        clean.to_csv(out, index=False)
    else:
        clean.to_parquet(out, index=False, engine="pyarrow")


def _is_address(address: str) -> bool:
    """Whether ``address`` reads as a Dask comm address (``tcp://host:port``, ``inproc://...``)."""
    try:
        parts = urlsplit(address if "://" in address else f"tcp://{address}")  # Dask's default: tcp
        parts.port  # noqa: B018  # raises past 65535
    except ValueError:
        return False
    host_ok = bool(parts.hostname) and not any(ch.isspace() for ch in address)
    return parts.scheme in ("tcp", "tls", "ucx", "inproc", "ws", "wss") and host_ok


def _engine(serial: bool, scheduler: str | None) -> object:
    """``False`` (in-process), a client of ``scheduler``, or the default engine; DataError with the reason
    when the address is malformed (it waited 60 s), nothing answers there (33 s and a traceback), the
    scheduler has no workers, or a worker cannot run this code."""
    if serial:
        return False
    if scheduler is not None and not _is_address(scheduler):
        raise DataError(f"--scheduler {scheduler!r} is not a Dask scheduler address such as tcp://host:8786")
    try:
        if scheduler is None:
            client: Any = default_client()
        else:
            from distributed import Client

            client = Client(scheduler, set_as_default=False, timeout=_CONNECT_SECONDS)
    except (OSError, TimeoutError) as exc:
        raise DataError(
            f"no Dask scheduler answers at {scheduler or 'DASK_SCHEDULER_ADDRESS'}: {exc}"
        ) from exc
    try:
        if not client.scheduler_info().get("workers"):
            raise DataError("the Dask scheduler has no workers: start some with `dask worker ADDRESS`")
        try:
            check_worker_code(client)
        except DataError:
            raise
        except Exception as exc:  # from a worker that cannot import mdp_core (Dask re-raises it as Exception)
            raise DataError(f"a Dask worker cannot run this code: {exc}") from exc
    except DataError:
        if scheduler is not None:
            client.close()
        raise
    return client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mdp_core.sweep", description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="sweep spec (JSON)")
    parser.add_argument("--out", type=Path, required=True, help="results file (.parquet or .csv)")
    parser.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    parser.add_argument("--serial", action="store_true", help="run in-process, without Dask")
    parser.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    args = parser.parse_args(argv)
    if args.out.suffix not in (".parquet", ".csv"):
        parser.error("--out must end in .parquet or .csv")
    try:
        spec = SweepSpec.from_json(args.spec.read_text())
    except (OSError, DataError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if warning := other_code_warning(spec):
        print(warning, file=sys.stderr)
    try:
        client = _engine(args.serial, args.scheduler)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    engine = describe_engine(client)
    print(f"{spec.n_configurations} tasks, {spec.n_rows} rows on {engine}", file=sys.stderr)
    t0 = time.perf_counter()

    def progress(fraction: float, message: str) -> None:
        print(f"[{fraction:6.1%}] {message}", file=sys.stderr, flush=True)

    try:
        df = run_sweep(spec, client=client, progress=progress)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError, CancelledError) as exc:  # a lost scheduler: said, not a traceback
        print(f"error: the Dask cluster failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - t0
    workers = 1 if client is False else len(client.scheduler_info().get("workers", {}))  # type: ignore[attr-defined]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    _write(df, args.out)
    summary = {
        "tasks": spec.n_configurations,
        "rows": len(df),
        "seconds": round(seconds, 3),
        "workers": workers,
        "engine": engine,
        "out": str(args.out),
        "code": CODE_VERSION,
    }
    if client is not False and args.scheduler:
        client.close()  # type: ignore[attr-defined]
    print(json.dumps(summary) if args.json else f"wrote {len(df)} rows to {args.out} in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
