"""The core never imports Streamlit (DESIGN.md: two layers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import importlib, pkgutil, sys
import mdp_core
for info in pkgutil.walk_packages(mdp_core.__path__, "mdp_core."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
bad = sorted(m for m in sys.modules if m == "streamlit" or m.startswith("streamlit."))
print(len(list(pkgutil.walk_packages(mdp_core.__path__))), bad)
assert not bad, bad
"""


def test_mdp_core_does_not_import_streamlit() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr + out.stdout
    assert "[]" in out.stdout
