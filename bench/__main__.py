"""Run benchmarks: ``python -m bench [NAME ...] [--quick] [--out DIR]``."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path

import bench


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))


def format_table(rows: list[dict]) -> str:
    """Plain-text table; floats with 4 significant digits."""
    if not rows:
        return "(no rows)"
    cols = list(dict.fromkeys(k for row in rows for k in row))

    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    body = [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.rjust(w) for v, w in zip(vals, widths, strict=True))  # noqa: E731
    return "\n".join([line(cols), line(["-" * w for w in widths]), *(line(b) for b in body)])


def main(argv: list[str] | None = None) -> int:
    names = available()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {names})")
    parser.add_argument("--quick", action="store_true", help="smaller instances (smoke run)")
    parser.add_argument("--out", default="bench/results", help="folder for the JSON results")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {names}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.names or names:
        module = importlib.import_module(f"bench.{name}")
        start = time.perf_counter()
        rows = module.run(quick=args.quick)
        total = time.perf_counter() - start
        print(f"\n== {name} ({total:.1f} s)\n{format_table(rows)}", flush=True)
        meta = {
            "benchmark": name,
            "quick": args.quick,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "seconds_total": total,
            "rows": rows,
        }
        path = out / f"{name}.json"
        path.write_text(json.dumps(meta, indent=2, default=float))
        print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
