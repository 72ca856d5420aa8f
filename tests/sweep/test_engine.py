"""run_sweep: tidy rows, identical results in-process and on a LocalCluster with 2 workers, cancellation,
the scheduler address in Dask's own setting, and a real `dask scheduler` + 2 `dask worker` deployment."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pytest
from distributed import Client

import mdp_core as core
import mdp_core.sweep.engine as engine
from mdp_core.errors import DataError
from mdp_core.sweep import SweepSpec, default_client, describe_engine, prepare_data, run_sweep
from mdp_core.sweep.cluster import STOP_CHECK_SECONDS, local_cluster
from mdp_core.sweep.spec import settings_key

ROOT = Path(__file__).resolve().parents[2]
PY = Path(sys.executable)
TIMINGS = ["configure_seconds", "seconds"]
#: Tiny DepHDP settings so a configuration takes well under a second on heart.
FAST = {"grid_points": 5, "opt_max_domain": 4, "calibration_pairs": 200, "max_contexts": 20}


def tiny(**kw: object) -> SweepSpec:
    args: dict = {
        "dataset": "heart",
        "task": ["prediction", "record"],
        "eps": [1.0, 4.0],
        "repetitions": 2,
        "methods": ["DepHDP", "ALC+RMP"],
        "options": FAST,
    }
    return SweepSpec(**{**args, **kw})


@pytest.fixture(scope="module")
def serial() -> pd.DataFrame:
    return run_sweep(tiny(), client=False)


@pytest.fixture(scope="module")
def serial_one() -> pd.DataFrame:
    """One task only (one stage-1 profile build per worker): keeps the cluster tests short."""
    return run_sweep(tiny(task="record"), client=False)


def test_rows_are_tidy_and_seeded_by_settings(serial: pd.DataFrame) -> None:
    spec = tiny()
    assert len(serial) == spec.n_rows == 2 * 2 * 2 * 2
    keys = ["task_index", "method", "repetition"]
    assert not serial.duplicated(keys).any()
    assert serial["task_index"].tolist() == sorted(serial["task_index"].tolist())
    pred = serial[serial.task == "prediction"]
    assert set(pred["metric"]) == {"accuracy"} and pred["higher_is_better"].all()
    assert set(serial[serial.task == "record"]["metric"]) == {"mean_distance"}
    assert (serial["utility"].between(0, 1) | (serial.task == "record")).all()
    assert np.isfinite(serial["loss"]).all() and (serial["seconds"] >= 0).all()
    # one configuration, recomputed alone with its own rng stream, gives the same rows
    data = prepare_data(spec)
    c = spec.configurations()[3]
    from mdp_core.sweep.engine import build_profiles, run_configuration

    rows, meta = run_configuration(data, spec, c, build_profiles(data, spec, c))
    alone = pd.DataFrame(rows).drop(columns=TIMINGS)
    part = (
        serial[serial.task_index == 3].drop(columns=TIMINGS).dropna(axis=1, how="all").reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(alone[part.columns], part)
    assert meta["task_index"] == 3 and meta["peak_rss_mb"] > 0


def test_a_budgets_draws_do_not_depend_on_the_other_budgets_of_the_grid(serial: pd.DataFrame) -> None:
    """Decision audit: draws were keyed by the grid position, so eps 3 scored 0.626 on one grid and 0.674
    on another, and removing low budgets changed the answer; now keyed by the settings' values."""
    alone = run_sweep(tiny(eps=[4.0]), client=False)
    cols = ["task", "method", "repetition", "utility", "loss"]
    on_grid = serial[serial.eps == 4.0][cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone[cols].reset_index(drop=True), on_grid)
    c = tiny().configurations()[1]
    assert settings_key(c) == settings_key(c._replace(index=99))  # the position is not part of it
    assert settings_key(c) != settings_key(c._replace(eps=np.nextafter(c.eps, 10)))


def test_array_privatisation_draws_exactly_what_the_composed_mechanism_draws() -> None:
    from mdp_core.sweep._releaser import Releaser

    spec = tiny(task="record", eps=[2.0])
    data = prepare_data(spec)
    res = core.run_dephdp(data.fit, spec.config(spec.configurations()[0]))
    mech = res.mechanism
    assert len(mech.groups) > 1 and tuple(mech.attributes) == data.attributes
    for seed in range(3):
        want = mech.privatize(data.test.codes, np.random.default_rng(seed)).to_numpy()
        got = Releaser(data.x_test, mech.attributes, mech.groups, mech.sizes).release(
            mech, np.random.default_rng(seed)
        )
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, data.x_test)  # it did privatise (eps = 2 on heart changes records)
    np.testing.assert_array_equal(  # the input is left alone
        data.x_test, data.test.codes[list(data.attributes)].to_numpy()
    )


def test_column_order_does_not_depend_on_completion_order() -> None:
    from mdp_core.sweep.engine import _frame

    spec = tiny()
    a = {"task_index": 0, "method": "DepHDP", "repetition": 0, "accuracy": 0.5, "auc": 0.6}
    b = {"task_index": 1, "method": "DepHDP", "repetition": 0, "mean_distance": 1.0}
    one, two = _frame([a, b], spec, "x", [], 0.0), _frame([b, a], spec, "x", [], 0.0)
    assert (
        list(one.columns)
        == list(two.columns)
        == ["task_index", "method", "repetition", "accuracy", "auc", "mean_distance"]
    )
    pd.testing.assert_frame_equal(one, two)


def test_a_serial_sweep_runs_blas_on_one_thread_like_the_workers() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    seen: list[int] = []

    def look(fraction: float, message: str) -> None:
        seen.append(max(i["num_threads"] for i in threadpoolctl.threadpool_info()))

    outside = max(i["num_threads"] for i in threadpoolctl.threadpool_info())
    if outside == 1:
        pytest.skip("BLAS runs on one thread here anyway")
    run_sweep(tiny(task="record", eps=[1.0], methods=["DepHDP"]), client=False, progress=look)
    assert set(seen[1:]) == {1}  # from stage 1 on: one BLAS thread (multi-threaded sums differ)
    assert max(i["num_threads"] for i in threadpoolctl.threadpool_info()) == outside  # restored


def test_a_serial_sweep_reports_and_stops_during_its_group_profiles() -> None:
    """Audit: "Which ε?" on a wide table showed "0/9 configurations" for minutes while stage 1 ran, and a stop
    waited for its end. Now the bar says the group profiles run, and a stop ends them."""
    from mdp_core.sweep.engine import clear_sweep_caches

    class StopSweepError(Exception):
        pass

    seen: list[tuple[float, str]] = []

    def stop_in_stage_one(fraction: float, message: str) -> None:
        seen.append((fraction, message))
        if "group profiles first" in message and "group 2/" in message:
            raise StopSweepError(message)

    clear_sweep_caches()
    with pytest.raises(StopSweepError, match=r"^0/2 configurations; group profiles first: group 2/"):
        run_sweep(tiny(task="record", methods=["DepHDP"]), client=False, progress=stop_in_stage_one)
    assert seen[0] == (0.0, "0/2 configurations")
    assert all(f == 0.0 for f, _ in seen) and len(seen) > 2


def test_identical_on_a_local_cluster_with_two_workers(serial_one: pd.DataFrame) -> None:
    from distributed import get_task_stream

    from mdp_core.sweep.engine import clear_sweep_caches

    seen: list[float] = []
    clear_sweep_caches()  # stage 1 is built on a worker, not taken from the serial run's store
    with (
        local_cluster(2, processes=True) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        assert describe_engine(client) == "embedded LocalCluster: 2 workers, 2 threads"
        with get_task_stream(client) as first:
            dist = run_sweep(tiny(task="record"), client=client, progress=lambda f, m: seen.append(f))
        pids = {m["pid"] for m in dist.attrs["tasks"]}
        with get_task_stream(client) as second:  # the same table and settings again: stage 1 is reused
            again = run_sweep(tiny(task="record", eps=[2.0]), client=client)
    pd.testing.assert_frame_equal(serial_one.drop(columns=TIMINGS), dist.drop(columns=TIMINGS))
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen)
    assert os.getpid() not in pids
    assert sum("-profiles-" in t["key"] for t in first.data) == 1
    assert not any("-profiles-" in t["key"] for t in second.data) and len(second.data) == 1
    fresh = run_sweep(tiny(task="record", eps=[2.0]), client=False)
    pd.testing.assert_frame_equal(fresh.drop(columns=TIMINGS), again.drop(columns=TIMINGS))


def test_an_error_in_progress_cancels_the_remaining_tasks() -> None:
    spec = tiny(eps=[0.5, 1.0, 2.0, 4.0, 8.0, 16.0], task="record", methods=["DepHDP"])

    class StopSweepError(Exception):
        pass

    def stop(fraction: float, message: str) -> None:
        if fraction > 0:
            raise StopSweepError(message)

    with (
        local_cluster(1, processes=False) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        with pytest.raises(StopSweepError, match="1/6 configurations"):
            run_sweep(spec, client=client, progress=stop)
        deadline = time.time() + 10
        while client.processing() and any(client.processing().values()) and time.time() < deadline:
            time.sleep(0.1)
        assert not any(client.processing().values())  # nothing left queued or running
        assert len(client.who_has()) == 0  # scattered data and results released


_RELEASE = threading.Event()


_RUN_BUNDLE = engine.run_bundle


def _held_bundle(*args: object, **kwargs: object) -> object:
    """A long configuration (module level: Dask pickles tasks): it ends only when the test lets it."""
    _RELEASE.wait(30)
    return _RUN_BUNDLE(*args, **kwargs)


def test_a_stop_is_seen_while_every_task_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit: progress was only reported when a task completed, so a stop waited for the next one (6.8 s
    on adult). Now the sweep reports every POLL_SECONDS while tasks run, and the stop ends it then."""

    class StopSweepError(Exception):
        pass

    said: list[str] = []

    def stop(fraction: float, message: str) -> None:
        said.append(message)
        if len(said) >= 3:
            raise StopSweepError(message)

    monkeypatch.setattr(engine, "run_bundle", _held_bundle)
    with (
        local_cluster(1, processes=False) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        try:
            with pytest.raises(StopSweepError, match=r"^0/2 configurations"):
                run_sweep(
                    tiny(eps=[1.0, 2.0], task="record", methods=["DepHDP"]), client=client, progress=stop
                )
            assert not _RELEASE.is_set() and all(m.startswith("0/2") for m in said)
        finally:
            _RELEASE.set()


_PROFILES_RELEASE = threading.Event()
_BUILD_PROFILES = engine.build_profiles


def _held_profiles(*args: object, **kwargs: object) -> object:
    """Stage 1 that ends only when the test lets it (module level: Dask pickles tasks)."""
    _PROFILES_RELEASE.wait(30)
    return _BUILD_PROFILES(*args, **kwargs)


def test_a_cluster_sweep_says_its_group_profiles_run_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from mdp_core.sweep.engine import clear_sweep_caches

    class StopSweepError(Exception):
        pass

    def stop(fraction: float, message: str) -> None:
        if "group profiles first" in message:
            raise StopSweepError(message)

    clear_sweep_caches()  # stage 1 is built on the cluster, not taken from an earlier sweep's store
    monkeypatch.setattr(engine, "build_profiles", _held_profiles)
    with (
        local_cluster(1, processes=False) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        try:
            with pytest.raises(StopSweepError, match=r"^0/1 configurations \(.*; group profiles first\)$"):
                run_sweep(tiny(eps=[1.0], task="record", methods=["DepHDP"]), client=client, progress=stop)
        finally:
            _PROFILES_RELEASE.set()


_UTILITY_CALLS: list[float] = []


_TASK_UTILITY = engine.task_utility


def _slow_utility(*args: object, **kwargs: object) -> object:
    """One repetition's scoring, slowed down and timed (module level: Dask pickles tasks)."""
    _UTILITY_CALLS.append(time.monotonic())
    time.sleep(0.1)
    return _TASK_UTILITY(*args, **kwargs)


def test_a_stop_ends_the_task_already_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit: Dask cannot interrupt a running task, so after a stop the task went on with every repetition
    (a core busy ~20 s on adult). Tasks now look at the sweep's stop event between units of work."""

    class StopSweepError(Exception):
        pass

    def stop(fraction: float, message: str) -> None:
        if _UTILITY_CALLS:
            raise StopSweepError(message)

    _UTILITY_CALLS.clear()
    monkeypatch.setattr(engine, "task_utility", _slow_utility)
    spec = tiny(eps=[1.0], task="record", methods=["DepHDP"], repetitions=200)  # 20 s if never stopped
    with (
        local_cluster(1, processes=False) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        with pytest.raises(StopSweepError):
            run_sweep(spec, client=client, progress=stop)
        stopped = time.monotonic()
        time.sleep(STOP_CHECK_SECONDS + 1.0)
        calls = len(_UTILITY_CALLS)
        time.sleep(1.0)
        assert len(_UTILITY_CALLS) == calls < 40  # no repetition after the stop took effect
        assert _UTILITY_CALLS[-1] - stopped < STOP_CHECK_SECONDS + 0.3


def test_default_client_honours_dask_scheduler_address() -> None:
    with (
        local_cluster(1, processes=False) as cluster,
        dask.config.set({"scheduler-address": cluster.scheduler_address}),
    ):
        client = default_client()
        try:
            assert client.scheduler.address == cluster.scheduler_address
            assert describe_engine(client).startswith(f"cluster at {cluster.scheduler_address}: 1 workers")
            assert default_client() is client  # reused
        finally:
            core.sweep.close_default_client()


def test_start_default_client_starts_it_in_the_background_once() -> None:
    from mdp_core.sweep.cluster import start_default_client

    with (
        local_cluster(1, processes=False) as cluster,
        dask.config.set({"scheduler-address": cluster.scheduler_address}),
    ):
        try:
            thread = start_default_client()
            client = default_client()  # waits for the background start instead of opening a second one
            thread.join(timeout=30)
            assert not thread.is_alive()
            assert client.scheduler.address == cluster.scheduler_address
            assert default_client() is client
            assert start_default_client().join(timeout=30) is None and default_client() is client
        finally:
            core.sweep.close_default_client()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_cli_on_a_real_scheduler_and_two_workers_matches_the_serial_run(
    serial_one: pd.DataFrame, tmp_path: Path
) -> None:
    dask_bin = PY.parent / "dask"
    if not dask_bin.exists():
        pytest.skip("the dask command is not installed in this venv")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = open(tmp_path / "dask.log", "w")  # noqa: SIM115
    procs = [
        subprocess.Popen(
            [str(dask_bin), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    ]
    try:
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        str(dask_bin),
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--nworkers",
                        "1",
                        "--no-dashboard",
                    ],
                    env=env,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            )
        with Client(address, timeout=30, set_as_default=False) as probe:
            probe.wait_for_workers(2, timeout=40)
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(tiny(task="record").to_json())
        out = tmp_path / "results.parquet"
        cmd = [str(PY), "-m", "mdp_core.sweep", str(spec_file), "--out", str(out), "--scheduler", address]
        done = subprocess.run([*cmd, "--json"], env=env, capture_output=True, text=True, timeout=90, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary["tasks"] == 2 and summary["rows"] == len(serial_one) and summary["workers"] == 2
        assert summary["engine"] == f"cluster at {address}: 2 workers, 2 threads"
        cluster = pd.read_parquet(out)
        pd.testing.assert_frame_equal(
            serial_one.drop(columns=TIMINGS), cluster.drop(columns=TIMINGS), check_dtype=False
        )
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_cli_rejects_a_bad_spec(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dataset": "heart", "eps": [0]}))
    done = subprocess.run(
        [str(PY), "-m", "mdp_core.sweep", str(bad), "--out", str(tmp_path / "r.parquet"), "--serial"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert "every eps value must lie in (0, " in done.stderr


def test_workers_that_loaded_other_code_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster started before the core changed (or a node with another install) would give numbers of
    other code for some tasks: run_sweep refuses it and names the versions."""
    import mdp_core.sweep.cluster as cluster

    with (
        local_cluster(1, processes=False) as lc,
        Client(lc, set_as_default=False) as client,
    ):
        workers_code = cluster.CODE_VERSION  # in-process workers report this module's loaded code
        monkeypatch.setattr(cluster, "CODE_VERSION", "0123456789ab")
        with pytest.raises(
            DataError, match=rf"other mdp_core code than this process \(0123456789ab\): .*\({workers_code}\)"
        ):
            run_sweep(tiny(eps=[1.0], task="record", methods=["DepHDP"]), client=client)


def _strip_code(*args: object, **kwargs: object) -> object:
    """run_bundle as code from before the per-task check answers: no code in its meta (module level)."""
    return [
        (rows, {k: v for k, v in meta.items() if k != "code"}) for rows, meta in _RUN_BUNDLE(*args, **kwargs)
    ]


def test_a_worker_with_other_code_that_joined_after_the_start_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cluster audit: a worker with other code joining 6 s into a sweep passed the start's check, and 258
    of 720 rows differed from the serial run without a word. Each task now checks the caller's code, and
    the caller refuses a task whose meta does not carry its code (a worker with older code)."""
    spec = tiny(eps=[1.0], task="record", methods=["DepHDP"])
    with (
        local_cluster(1, processes=False) as lc,
        Client(lc, set_as_default=False) as client,
    ):
        monkeypatch.setattr(engine, "check_worker_code", lambda client: None)  # it joined after the check
        monkeypatch.setattr(engine, "CODE_VERSION", "0123456789ab")  # the caller's code differs
        with pytest.raises(DataError, match=r"other mdp_core code \(\w+\) than this sweep \(0123456789ab\)"):
            run_sweep(spec, client=client)
        monkeypatch.undo()
        monkeypatch.setattr(engine, "run_bundle", _strip_code)
        with pytest.raises(
            DataError, match=r"other mdp_core code \(from before this check\) than this sweep"
        ):
            run_sweep(spec, client=client)


def test_a_sweep_whose_data_was_lost_with_a_worker_runs_once_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cluster audit: stage 1 reused from an earlier sweep was held by one worker; killed, the sweep died
    with "cancelled for reason: already forgotten". It is now on every worker, and such a loss runs the
    (deterministic) sweep once more; other cancellations are not retried."""
    from concurrent.futures import CancelledError

    from distributed.client import FutureCancelledError

    calls: list[int] = []

    def flaky(*args: object) -> pd.DataFrame:
        calls.append(1)
        if len(calls) == 1:
            raise FutureCancelledError("sweep-1-2", "already forgotten")
        return pd.DataFrame({"ok": [1]})

    monkeypatch.setattr(engine, "_run_distributed", flaky)
    said: list[str] = []
    out = run_sweep(tiny(eps=[1.0], task="record"), client=None, progress=lambda f, m: said.append(m))
    assert len(calls) == 2 and out["ok"].tolist() == [1]
    assert "a Dask worker was lost with data the sweep needed: running it again" in said

    def lost(*args: object) -> pd.DataFrame:  # the scheduler itself went away: Dask's own words
        calls.append(1)
        raise FutureCancelledError("k", "scheduler-connection-lost", "Client lost the connection")

    calls.clear()
    monkeypatch.setattr(engine, "_run_distributed", lost)
    with pytest.raises(CancelledError, match="scheduler-connection-lost"):
        run_sweep(tiny(eps=[1.0], task="record"), client=None)
    assert len(calls) == 1  # not retried


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:99999", "not a address", "http://127.0.0.1:8786"])
def test_cli_refuses_a_malformed_scheduler_address_at_once(address: str) -> None:
    """Cluster audit: these waited 32-63 s and ended in a traceback."""
    from mdp_core.sweep.__main__ import _engine

    start = time.perf_counter()
    with pytest.raises(DataError, match="is not a Dask scheduler address such as tcp://host:8786"):
        _engine(False, address)
    assert time.perf_counter() - start < 1


def test_cli_refuses_a_scheduler_without_workers() -> None:
    from mdp_core.sweep.__main__ import _engine

    with (
        local_cluster(0, processes=False) as lc,
        pytest.raises(DataError, match="the Dask scheduler has no workers"),
    ):
        _engine(False, lc.scheduler_address)


def test_cli_takes_a_scheduler_address_without_a_scheme_as_dask_does() -> None:
    from mdp_core.sweep.__main__ import _is_address

    assert _is_address("127.0.0.1:8786") and _is_address("localhost:8786") and _is_address("tcp://h:1")
    assert not _is_address("localhost:99999") and not _is_address("http://h:8786")


def test_the_embedded_cluster_listens_on_this_machine_only() -> None:
    import psutil

    before = {c.laddr for c in psutil.Process().net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    with local_cluster(1, processes=False):
        listening = [
            c.laddr
            for c in psutil.Process().net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr not in before
        ]
    assert len(listening) >= 2  # the scheduler and its HTTP server (it served its logs on 0.0.0.0)
    assert {address.ip for address in listening} == {"127.0.0.1"}
