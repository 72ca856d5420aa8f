"""AppTest for the geo map page (embedded city, no network)."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest


def _deck(at: AppTest) -> dict:
    return json.loads(at.get("deck_gl_json_chart")[0].proto.json)


def test_geo_page_default_city(app: AppTest) -> None:
    at = app.switch_page("views/geo.py").run()
    assert not at.exception
    deck = _deck(at)
    ids = {layer["id"] for layer in deck["layers"]}
    assert {"geo_roads", "geo_heat", "geo_targets", "geo_reports", "geo_true"} <= ids
    assert deck.get("mapStyle") in (None, "")
    roads = next(layer for layer in deck["layers"] if layer["id"] == "geo_roads")
    assert len(roads["data"]) > 1000  # the Helsinki road polylines
    table = at.dataframe[0].value
    assert list(table["method"]) == [
        "Tree extension (MLaEt-A)",
        "Exponential mechanism",
        "EM + Bayesian remap",
        "LP on seed grid (LP-A)",
    ]
    err = dict(zip(table["method"], table["expected travel error (km)"], strict=True))
    assert err["Tree extension (MLaEt-A)"] < err["Exponential mechanism"]
    private = dict(zip(table["method"], table["private (checked)"], strict=True))
    assert private["Tree extension (MLaEt-A)"] == "yes" and private["Exponential mechanism"] == "yes"
    assert any("OpenStreetMap contributors" in c.value for c in at.caption)


def test_geo_page_controls(app: AppTest) -> None:
    at = app.switch_page("views/geo.py").run()
    at.selectbox(key="geo_method").set_value("em").run()
    assert not at.exception
    first = at.selectbox(key="geo_true").options[0]
    at.selectbox(key="geo_true").set_value(int(first.split(":")[0].lstrip("#"))).run()
    assert not at.exception
    true_layer = next(layer for layer in _deck(at)["layers"] if layer["id"] == "geo_true")
    assert len(true_layer["data"]) == 1
    at.selectbox(key="geo_depth").set_value(1).run()
    at.select_slider(key="geo_eps").set_value(2.0).run()
    assert not at.exception
    at.toggle(key="geo_curve").set_value(True).run()
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {trace["name"] for trace in spec["data"]} == {
        "Tree extension (MLaEt-A)",
        "Exponential mechanism",
        "EM + Bayesian remap",
    }


def test_geo_page_bad_upload(app: AppTest) -> None:
    at = app.switch_page("views/geo.py").run()
    at.radio(key="geo_source").set_value("Upload a map file").run()
    assert not at.exception
    assert any("Upload a map file" in i.value for i in at.info)
