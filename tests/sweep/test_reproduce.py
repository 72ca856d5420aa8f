"""The downloaded sweep spec reproduces the page's sweep: ``python -m mdp_core.sweep`` on it gives the page's
rows and numbers exactly (heart and an upload), and says so when it runs other code than the page did.

Audit: the CLI gave the page's rows but other utilities (heart, SPL+DPN at eps 0.5, repetition 0: 0.500
against 0.509 on the page; all five methods, up to 0.070). The app had loaded the core before a commit
changed the allocation and its Dask workers kept that code; the CLI ran the new code. The spec now names
the code (``code``), the CLI warns when it runs other code, and the page restarts workers of other code.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

import mdp_core as core
from mdp_core.sweep.__main__ import main, other_code_warning
from mdp_core.sweep.engine import clear_sweep_caches
from mdp_core.sweep.spec import CODE_VERSION

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
TIMINGS = ["configure_seconds", "seconds"]


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """What the page's download buttons offer, by media file id (AppTest keeps no file after a run)."""
    import streamlit.testing.v1.app_test as app_test

    files: dict[str, bytes] = {}

    class Recording(MemoryMediaFileStorage):
        def load_and_get_id(self, path_or_data: Any, mimetype: str, kind: Any, filename: Any = None) -> str:
            file_id = super().load_and_get_id(path_or_data, mimetype, kind, filename)
            files[file_id] = self._files_by_id[file_id].content
            return file_id

    monkeypatch.setattr(app_test, "MemoryMediaFileStorage", Recording)
    return files


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch, downloads: dict[str, bytes]) -> AppTest:
    import ui.sweep

    monkeypatch.setattr(ui.sweep, "PRESTART", False)
    st.cache_data.clear()
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.run()
    return at


def _offered(at: AppTest, downloads: dict[str, bytes], key: str) -> bytes:
    button = next(b for b in at.get("download_button") if b.key == key)
    return downloads[button.proto.url.rsplit("/", 1)[1].split(".")[0]]


def _sweep(at: AppTest, downloads: dict[str, bytes]) -> tuple[str, pd.DataFrame]:
    """Shrink the page's sweep, run it in-process and return the offered spec (JSON) and results (CSV)."""
    at.switch_page("views/sweep.py").run()
    at.radio(key="sweep_engine").set_value("serial").run()
    at.slider(key="sweep_n_eps").set_value(2).run()
    at.slider(key="sweep_reps").set_value(2).run()
    at.button(key="sweep_run").click().run()
    deadline = time.monotonic() + 120
    while not at.get("download_button"):
        assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
        assert time.monotonic() < deadline, "the sweep did not land"
        time.sleep(0.1)
        at.run()
    spec = _offered(at, downloads, "sweep_dl_spec").decode()
    return spec, pd.read_csv(io.BytesIO(_offered(at, downloads, "sweep_dl_csv")))


def _cli(spec: str, where: Path) -> tuple[pd.DataFrame, str]:
    """``python -m mdp_core.sweep`` on the spec file in ``where`` (a new process: no cache of the page's)."""
    (where / "sweep_spec.json").write_text(spec)
    done = subprocess.run(
        [sys.executable, "-m", "mdp_core.sweep", "sweep_spec.json", "--serial", "--out", "cli.csv"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return pd.read_csv(where / "cli.csv"), done.stderr


def _same_rows_and_numbers(page: pd.DataFrame, cli: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(page.drop(columns=TIMINGS), cli.drop(columns=TIMINGS), check_exact=True)


def test_the_downloaded_spec_reproduces_the_page_s_heart_sweep(
    page: AppTest, downloads: dict[str, bytes], tmp_path: Path
) -> None:
    spec_text, results = _sweep(page, downloads)
    spec = core.SweepSpec.from_json(spec_text)
    assert json.loads(spec_text)["code"] == spec.code == CODE_VERSION
    assert (spec.dataset, spec.n_rows, len(results)) == ("heart", 20, 20)
    assert f"The spec names the core's code version ({CODE_VERSION})" in " ".join(
        c.value for c in page.caption
    )
    assert not page.warning
    clear_sweep_caches()  # the page's stage 1 must not stand in for the spec's own
    again = core.run_sweep(spec, client=False)
    _same_rows_and_numbers(results, pd.read_csv(io.StringIO(again.to_csv(index=False))))
    cli, stderr = _cli(spec_text, tmp_path)
    _same_rows_and_numbers(results, cli)
    assert "warning" not in stderr


def visits(n: int = 80) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    age = rng.integers(20, 80, n)
    return pd.DataFrame(
        {
            "age": age,
            "weight": np.round(rng.normal(75, 12, n), 1),
            "city": rng.choice(["Lyon", "Paris", "Nice"], n),
            "visits": rng.integers(0, 5, n),
            "target": (age + rng.normal(0, 15, n) > 50).astype(int),
        }
    )


def test_the_downloaded_spec_reproduces_the_page_s_sweep_of_an_upload(
    page: AppTest, downloads: dict[str, bytes], tmp_path: Path
) -> None:
    path = tmp_path / "visits.csv"
    visits().to_csv(path, index=False)
    page.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    page.file_uploader(key="side_upload").set_value(("visits.csv", path.read_bytes(), "text/csv")).run()
    state = page.session_state["mdp_app_state"]
    page.selectbox(key=f"side_target_{state.dataset_key}").set_value("target").run()
    state.bins = {"age": 3}  # a Data page choice the spec must carry
    spec_text, results = _sweep(page, downloads)
    spec = core.SweepSpec.from_json(spec_text)
    assert (spec.dataset, spec.target, spec.column_bins) == ("visits.csv", "target", (("age", 3),))
    assert spec.code == CODE_VERSION and len(results) == spec.n_rows == 20
    cli, stderr = _cli(spec_text, tmp_path)  # run beside the file, as its name in the spec says
    _same_rows_and_numbers(results, cli)
    assert "warning" not in stderr


def test_the_cli_warns_when_it_runs_other_code_than_the_spec_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = core.SweepSpec("heart", task="record", eps=(2.0,), repetitions=2, methods=("SPL+DPN",))
    assert other_code_warning(spec) == ""
    written = core.SweepSpec.from_dict({**spec.to_dict(), "code": CODE_VERSION})
    assert other_code_warning(written) == ""
    older = core.SweepSpec.from_dict({**spec.to_dict(), "code": "0123456789ab"})
    (tmp_path / "s.json").write_text(older.to_json())
    assert main([str(tmp_path / "s.json"), "--serial", "--json", "--out", str(tmp_path / "r.csv")]) == 0
    out, err = capsys.readouterr()
    assert (
        f"warning: the spec was written by mdp_core code 0123456789ab and this is {CODE_VERSION}: the "
        "results can differ from the ones that code gave (the app's page); run the spec with the code that "
        "wrote it, or run the sweep on the page again"
    ) in err.splitlines()
    assert json.loads(out.splitlines()[-1])["code"] == CODE_VERSION


class _Cluster:
    closed = False

    def close(self) -> None:
        self.closed = True


class _Client:
    """Stands in for a Dask client whose workers report ``versions`` (``cluster``: None if not embedded)."""

    def __init__(self, versions: list[str], cluster: _Cluster | None) -> None:
        self.versions, self.cluster, self.closed = versions, cluster, False

    def run(self, function: Any) -> dict[str, str]:
        assert function.__name__ == "loaded_code_version"
        return {f"tcp://w{i}": v for i, v in enumerate(self.versions)}

    def close(self) -> None:
        self.closed = True


class _Holder:
    """Stands in for the page's engine holder (``ui.sweep._Engine``) holding ``client``."""

    def __init__(self, client: _Client) -> None:
        self.lock, self.client = threading.Lock(), client

    def get(self) -> _Client:
        return self.client


def test_the_page_restarts_an_embedded_cluster_whose_workers_run_other_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ui.sweep

    stale, fresh = _Client(["old", "new"], _Cluster()), _Client(["new", "new"], _Cluster())
    started = [fresh]
    monkeypatch.setattr(ui.sweep, "default_client", started.pop)
    holder = _Holder(stale)
    assert ui.sweep.fresh_client(holder, "new") is fresh and holder.client is fresh and not started
    assert stale.closed and stale.cluster is not None and stale.cluster.closed and not fresh.closed
    assert ui.sweep.fresh_client(holder, "new") is fresh  # checked again, kept


def test_the_page_refuses_workers_of_other_code_it_cannot_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    import ui.sweep

    external = _Client(["old", "new"], None)
    with pytest.raises(core.DataError) as error:
        ui.sweep.fresh_client(_Holder(external), "new")
    assert str(error.value) == (
        "the Dask workers run other mdp_core code (old) than this app (new), so their numbers would not be "
        "this code's. Restart them with this code, or choose the in-process engine"
    )
    assert not external.closed
    # the app's own code is not the code on disk: restarted workers load the disk's
    monkeypatch.setattr(ui.sweep, "default_client", lambda: _Client(["disk"], _Cluster()))
    with pytest.raises(core.DataError) as error:
        ui.sweep.fresh_client(_Holder(_Client(["old"], _Cluster())), "new")
    assert str(error.value) == (
        "the restarted Dask workers load other mdp_core code (disk) than this app runs (new): the core "
        "changed on disk since the app started. Restart the app, or choose the in-process engine"
    )


def test_the_page_says_when_the_core_on_disk_is_not_the_code_it_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ui.sweep

    text, changed = ui.sweep.code_note(CODE_VERSION)
    assert not changed and text.startswith(f"The spec names the core's code version ({CODE_VERSION})")
    monkeypatch.setattr(ui.sweep, "code_version", lambda: "ffffffffffff")
    text, changed = ui.sweep.code_note(CODE_VERSION)
    assert changed and text == (
        f"The core's code changed on disk since this app loaded it ({CODE_VERSION}, now ffffffffffff): these "
        "numbers come from the loaded code, while `python -m mdp_core.sweep` on the downloaded spec runs the "
        "code on disk, whose numbers can differ. Restart the app to sweep with the code on disk."
    )


def test_a_table_encoded_by_the_code_before_a_re_import_is_named_so() -> None:
    stale = type("Encoded", (), {})()  # what the app's cached table is after Streamlit re-imported the core
    with pytest.raises(core.DataError, match="encoded by the mdp_core code loaded before its files changed"):
        core.prepare_data(core.SweepSpec("heart"), stale)
    with pytest.raises(TypeError, match="encoded must be an Encoded table, got DataFrame"):
        core.prepare_data(core.SweepSpec("heart"), pd.DataFrame())
