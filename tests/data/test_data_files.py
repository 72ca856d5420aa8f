"""The embedded sample data (data/) and the pure transforms of scripts/prepare_data.py.

Checksums are compared with the table in data/README.md (so the README cannot drift from the files); the
road file is loaded with osmnx while every socket connection is refused (proves it needs no network).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import importlib.util
import re
import socket
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
FILES = ("heart.csv", "adult.csv.gz", "wine_quality.csv", "helsinki.osm.bz2")
HEX64 = "`([0-9a-f]{64})`"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prepare_data", ROOT / "scripts" / "prepare_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


prep = _load_script()


def _readme_table() -> dict[str, tuple[int, str, str | None]]:
    """file -> (bytes, sha256 of the file, sha256 of the uncompressed content or None) from data/README.md."""
    table = {}
    pattern = re.compile(rf"^\| `([\w.]+)` \| [^|]+ \| ([\d,]+) \| {HEX64} \| (?:{HEX64}|\(same\)) \|$")
    for line in (DATA / "README.md").read_text(encoding="utf-8").splitlines():
        if m := pattern.match(line):
            table[m[1]] = (int(m[2].replace(",", "")), m[3], m[4])
    return table


# ------------------------------------------------------------------------------------ files on disk
def test_readme_lists_every_file_with_its_size_and_checksums() -> None:
    table = _readme_table()
    assert sorted(table) == sorted(FILES)
    for name, (size, sha_file, sha_content) in table.items():
        raw = (DATA / name).read_bytes()
        assert len(raw) == size, name
        assert hashlib.sha256(raw).hexdigest() == sha_file, name
        if sha_content is not None:
            content = prep._content(name, raw)
            assert content != raw
            assert hashlib.sha256(content).hexdigest() == sha_content, name


def test_files_are_small() -> None:
    sizes = {name: (DATA / name).stat().st_size for name in FILES}
    assert all(size < 1_000_000 for size in sizes.values()), sizes
    assert sum(sizes.values()) < 1_500_000


def test_heart_matches_uci_cleveland() -> None:
    from mdp_core import load_dataset  # imported here: a broken sibling module fails only these

    df = load_dataset("heart")
    assert df.shape == (303, 14)
    assert list(df.columns) == list(prep.HEART_COLUMNS)
    assert df.isna().sum()[lambda s: s > 0].to_dict() == {"ca": 4, "thal": 2}
    assert df["target"].value_counts().to_dict() == {0: 164, 1: 139}
    assert set(df["sex"]) == {0, 1} and set(df["cp"]) == {1, 2, 3, 4}
    assert set(df["restecg"]) == {0, 1, 2} and set(df["slope"]) == {1, 2, 3}
    assert set(df["ca"].dropna()) == {0, 1, 2, 3} and set(df["thal"].dropna()) == {3, 6, 7}
    # The first rows of UCI's processed.cleveland.data (num 2 -> target 1).
    lines = (DATA / "heart.csv").read_text().splitlines()
    assert lines[1:4] == [
        "63,1,1,145,233,1,2,150,0,2.3,3,0,6,0",
        "67,1,4,160,286,0,2,108,1,1.5,2,3,3,1",
        "67,1,4,120,229,0,2,129,1,2.6,2,2,7,1",
    ]


def test_adult_is_train_plus_test_with_harmonised_labels() -> None:
    raw = (DATA / "adult.csv.gz").read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip mtime = 0: rebuilding gives the same bytes
    from mdp_core import load_dataset  # imported here: a broken sibling module fails only these

    df = load_dataset("adult")
    assert df.shape == (48_842, 15)
    assert list(df.columns) == list(prep.ADULT_COLUMNS)
    assert df["income"].value_counts().to_dict() == {"<=50K": 37_155, ">50K": 11_687}
    missing = df.isna().sum()[lambda s: s > 0].to_dict()
    assert missing == {"workclass": 2_799, "occupation": 2_809, "native-country": 857}
    text = gzip.decompress(raw).decode()
    assert "?" not in text and ", " not in text and " ," not in text
    assert text.splitlines()[32_562].startswith("25,Private,226802,11th,")  # first adult.test row


def test_wine_is_red_then_white() -> None:
    from mdp_core import load_dataset  # imported here: a broken sibling module fails only these

    df = load_dataset("wine")
    assert df.shape == (6_497, 13)
    assert list(df.columns)[-2:] == ["quality", "type"] and "pH" in df.columns
    assert df["type"].tolist() == ["red"] * 1_599 + ["white"] * 4_898
    assert df.isna().sum().sum() == 0
    assert (df["quality"].min(), df["quality"].max()) == (3, 9)


def test_osm_file_has_only_highway_ways_with_trimmed_references() -> None:
    root = ET.fromstring(bz2.decompress((DATA / "helsinki.osm.bz2").read_bytes()))
    assert "OpenStreetMap" in root.attrib["copyright"] and "odbl" in root.attrib["license"]
    node_ids = [int(n.attrib["id"]) for n in root.iter("node")]
    ways = list(root.iter("way"))
    assert (len(node_ids), len(ways)) == (6_045, 2_461)
    referenced = set()
    for way in ways:
        refs = [int(nd.attrib["ref"]) for nd in way.iter("nd")]
        tags = {t.attrib["k"]: t.attrib["v"] for t in way.iter("tag")}
        assert len(refs) >= 2
        assert tags["highway"] not in prep.EXCLUDED_HIGHWAYS and tags.get("area") != "yes"
        assert set(tags) <= prep.WAY_TAGS
        referenced.update(refs)
    assert referenced == set(node_ids)  # every reference resolves, no unused node
    assert node_ids == sorted(node_ids)


def test_road_file_loads_offline_with_osmnx(monkeypatch: pytest.MonkeyPatch) -> None:
    ox = pytest.importorskip("osmnx")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    start = time.perf_counter()
    G = ox.graph_from_xml(DATA / "helsinki.osm.bz2")
    seconds = time.perf_counter() - start
    assert (G.number_of_nodes(), G.number_of_edges()) == (2_526, 6_795)
    assert seconds < 15, f"graph_from_xml took {seconds:.1f} s"
    lats = [d["y"] for _, d in G.nodes(data=True)]
    lons = [d["x"] for _, d in G.nodes(data=True)]
    assert 60.16 < min(lats) < max(lats) < 60.18 and 24.93 < min(lons) < max(lons) < 24.96


# ------------------------------------------------------------------------- transforms (no network)
HEART_TAB = (
    "age\tgender\tchest pain\trest SBP\tcholesterol\tfasting blood sugar > 120\trest ECG\tmax HR\t"
    "exerc ind ang\tST by exercise\tslope peak exc ST\tmajor vessels colored\tthal\tdiameter narrowing\n"
    "c\td\td\tc\tc\td\td\tc\td\tc\td\tc\td\td\n\t\t\t\t\t\t\t\t\t\t\t\t\tclass\n"
)
HEART_ROW = (
    "63\tmale\ttypical ang\t145\t233\t1\tleft vent hypertrophy\t150\t0\t2.3\tdownsloping\t"
    "0\tfixed defect\t0\n"
)


def test_build_heart_maps_labels_to_uci_codes() -> None:
    rows = [HEART_ROW, "41\tfemale\tasymptomatic\t130\t204\t0\tST-T abnormal\t172\t0\t2\tflat\t?\t?\t1\n"]
    out = prep.build_heart(HEART_TAB + "".join(rows * 151 + rows[:1])).decode()
    lines = out.splitlines()
    assert lines[0] == ",".join(prep.HEART_COLUMNS)
    assert lines[1] == "63,1,1,145,233,1,2,150,0,2.3,3,0,6,0"
    assert lines[2] == "41,0,4,130,204,0,1,172,0,2.0,2,,,1"
    assert len(lines) == 304


def test_build_heart_rejects_unknown_labels_and_wrong_shape() -> None:
    with pytest.raises(ValueError, match="303 rows"):
        prep.build_heart(HEART_TAB + HEART_ROW)
    with pytest.raises(KeyError, match="martian"):
        prep.build_heart(HEART_TAB + HEART_ROW.replace("male", "martian") * 303)


def _adult_csv(rows: list[str], label: str = "income-per-year") -> str:
    return ",".join([*prep.ADULT_COLUMNS[:-1], label]) + "\n" + "".join(rows)


def test_adult_rows_strip_spaces_missing_and_test_split_dots() -> None:
    row = "25, Private, 226802, 11th, 7, Never-married, ?, Own-child, Black, Male, 0, 0, 40, ?, <=50K.\n"
    parsed = prep._adult_rows(_adult_csv([row, row.replace("<=50K.", ">50K"), "\n"]), "t")
    assert parsed[0][6] == "" and parsed[0][13] == "" and parsed[0][1] == "Private"
    assert [r[-1] for r in parsed] == ["<=50K", ">50K"]
    with pytest.raises(ValueError, match="bad row"):
        prep._adult_rows(_adult_csv([row.replace("<=50K.", "rich")]), "t")
    with pytest.raises(ValueError, match="unexpected header"):
        prep._adult_rows(_adult_csv([row], label="salary"), "t")


def test_build_wine_renames_color_to_type_and_checks_shape() -> None:
    header = "a,b,c,d,e,f,g,h,pH,i,j,quality,color\n"
    body = "7.4,0.7,0.0,1.9,0.076,11.0,34.0,0.9978,3.51,0.56,9.4,5,red\n"
    out = prep.build_wine(header + body * 6_497).decode().splitlines()
    assert out[0].endswith(",quality,type") and out[1] == body.strip()
    with pytest.raises(ValueError, match="6,497"):
        prep.build_wine(header + body)


@pytest.mark.parametrize(
    ("e7", "text"),
    [(0, "0.0000000"), (249351837, "24.9351837"), (-5, "-0.0000005"), (-1234567890, "-123.4567890")],
)
def test_deg_formats_fixed_point_exactly(e7: int, text: str) -> None:
    assert prep._deg(e7) == text


def test_longest_run_keeps_the_longest_present_stretch() -> None:
    present = {1, 2, 3, 5, 6, 7, 8}
    assert prep._longest_run([1, 2, 3, 4, 5, 6, 7, 8], present) == [5, 6, 7, 8]
    assert prep._longest_run([9, 1, 2, 4, 5, 6], present) == [1, 2]  # first on ties
    assert prep._longest_run([4, 9], present) == []
