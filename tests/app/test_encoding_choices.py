"""The Data page's choices (re-included date, exclusions, kinds, bins) reach the release and the sweep spec.

Audit: the downloaded sweep spec did not rebuild the table the page swept once a column's bins were set,
and a scenario's release dropped a re-included date column and failed on the kind of an excluded column.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pagewait import rerun_until
from streamlit.testing.v1 import AppTest

import mdp_core as core
import ui.release as release_view
import ui.sweep as sweep_view

FAST = {"grid_points": 8, "opt_max_domain": 8, "calibration_pairs": 200, "max_contexts": 20}


def visits(n: int = 90) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    age = rng.integers(20, 80, n)
    return pd.DataFrame(
        {
            "visit_id": [f"V{i:05d}" for i in range(n)],
            "visit_date": pd.date_range("2021-01-03", periods=n, freq="5D").strftime("%Y-%m-%d"),
            "age": age,
            "weight": np.round(rng.normal(75, 12, n), 1),
            "city": rng.choice(["Lyon", "Paris", "Nice"], n),
            "visits": rng.integers(0, 5, n),
            "target": (age + rng.normal(0, 15, n) > 50).astype(int),
        }
    )


def test_the_page_s_table_is_what_a_scenario_and_a_sweep_spec_rebuild(
    app: AppTest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "visits.csv"
    visits().to_csv(path, index=False)
    app.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    app.file_uploader(key="side_upload").set_value(("visits.csv", path.read_bytes(), "text/csv")).run()
    state = app.session_state["mdp_app_state"]
    state.target = "target"
    state.include = {"visit_date": "month"}  # as the Data page's widgets write them
    state.exclude = ["city"]
    state.kind_overrides = {"city": "ordinal", "visits": "nominal"}  # city's is moot once it is excluded
    state.bins = {"age": 3, "weight": 4}
    state.ranges = {"weight": (30.0, 130.0), "city": (0.0, 1.0)}  # city's is moot: not numeric
    state.categories = {"visits": ("0", "1", "2", "3", "4", "5"), "weight": ("x",)}  # weight's is moot
    seen: list[tuple[core.SweepSpec, core.Encoded]] = []
    monkeypatch.setattr(sweep_view, "stored", lambda spec, encoded: seen.append((spec, encoded)))
    app.switch_page("views/sweep.py").run()
    assert not app.exception
    spec, page_table = seen[-1]
    assert "visit_date" in page_table.columns and "city" not in page_table.columns
    assert page_table.schema.kind("visits") == "nominal" and page_table.bins["age"] == 3
    assert page_table.ranges == {"weight": (30.0, 130.0)}
    assert page_table.categories == {"visits": ("0", "1", "2", "3", "4", "5")}
    assert list(page_table.levels["visits"]) == ["0", "1", "2", "3", "4", "5", "other"]
    np.testing.assert_allclose(page_table.levels["weight"], [42.5, 67.5, 92.5, 117.5])  # 4 bins of 30-130
    # the downloaded spec, run from the file, rebuilds the page's table exactly
    again = replace(core.SweepSpec.from_json(spec.to_json()), dataset=str(path))
    rebuilt = core.prepare_data(again)
    split = core.split_encoded(page_table, spec.fit_fraction, np.random.default_rng(spec.seed))
    pd.testing.assert_frame_equal(rebuilt.fit.codes, split[0].codes)
    assert rebuilt.fit.schema == page_table.schema and rebuilt.fit.bins == page_table.bins
    assert rebuilt.fit.ranges == page_table.ranges and rebuilt.fit.categories == page_table.categories
    # the release encodes the same table (and does not fail on the excluded column's kind)
    monkeypatch.setattr(release_view, "CONFIG_OPTIONS", dict(FAST))
    release_view.store().clear()
    app.switch_page("views/release.py").run()
    app.button(key="rel_prepare").click().run(timeout=300)
    rerun_until(app, lambda: "rel_prepare_stop" not in [b.key for b in app.button], 300)
    assert not app.exception and not app.error
    done = release_view.store().get(next(k for k in release_view.store()._items if k[0] == "outcome"))
    assert done.encoded.fingerprint == page_table.fingerprint
    assert "visit_date" in done.released.columns and "city" not in done.released.columns
    assert done.scenario.include == (("visit_date", "month"),)
    assert done.scenario.ranges == (("weight", 30.0, 130.0),)
    assert done.audit["scope"]["public_ranges"] == {"weight": [30.0, 130.0]}
    assert done.audit["scope"]["public_categories"] == {"visits": ["0", "1", "2", "3", "4", "5"]}
    assert set(done.released["visits"]) <= {"0", "1", "2", "3", "4", "5", "other"}  # the declared labels


def test_the_schema_editor_declares_a_range_only_with_both_ends_in_order() -> None:
    from ui.data import public_ranges

    edited = pd.DataFrame(
        {
            "attribute": ["age", "weight", "height", "city", "visits"],
            "kind": ["numeric", "numeric", "numeric", "nominal", "numeric"],
            "public min": pd.array([0.0, None, 200.0, None, None], dtype="Float64"),
            "public max": pd.array([120.0, 90.0, 100.0, None, None], dtype="Float64"),
        }
    )
    ranges, problems = public_ranges(edited, {"city": (0.0, 1.0), "weight": (1.0, 2.0)})
    assert ranges == {"age": (0.0, 120.0), "city": (0.0, 1.0)}  # city keeps its range for the numeric kind
    assert len(problems) == 2 and "'weight' needs both ends" in problems[0] and "'height'" in problems[1]


def test_the_schema_editor_declares_distinct_comma_separated_categories() -> None:
    from ui.data import public_categories

    edited = pd.DataFrame(
        {
            "attribute": ["city", "grade", "sex", "age"],
            "kind": ["nominal", "ordinal", "binary", "numeric"],
            "public categories": ["Lyon, Paris , Nice", "low,,high", None, None],
        }
    )
    lists, problems = public_categories(edited, {"age": ("1",), "sex": ("m", "f")})
    assert lists == {"city": ("Lyon", "Paris", "Nice"), "age": ("1",)}  # sex cleared; age kept for its kind
    assert len(problems) == 1 and "'grade' need distinct labels" in problems[0]


def test_a_declared_domain_pins_its_column_s_kind() -> None:
    """Privacy audit: one record could change an inferred kind (a value 'x' in integer grades made them
    nominal), and with it the distances of a column declared public."""
    from ui.data import declared_kinds

    edited = pd.DataFrame(
        {"attribute": ["age", "grade", "city", "w"], "kind": ["numeric", "ordinal", "nominal", "numeric"]}
    )
    pinned = declared_kinds(
        edited, {"age": (0.0, 1.0), "grade": (0.0, 9.0)}, {"grade": ("1", "2"), "w": ("x",)}
    )
    assert pinned == {"age": "numeric", "grade": "ordinal"}  # a range kept for another kind pins nothing
