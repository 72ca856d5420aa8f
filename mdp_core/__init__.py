"""mdp_core: the science behind mDP Lab, importable without Streamlit.

The public API (see DESIGN.md) is re-exported here; each submodule lists its names in ``__all__``.
``mdp_core.geo`` (location mechanisms on road networks) is imported on demand, as it pulls in osmnx.
"""

from __future__ import annotations

from mdp_core import (
    adequacy,
    allocation,
    data,
    dependency,
    errors,
    evaluation,
    ggm,
    leakage,
    lp,
    mechanisms,
    metrics,
    pipeline,
    tasks,
)
from mdp_core.adequacy import *
from mdp_core.allocation import *
from mdp_core.data import *
from mdp_core.dependency import *
from mdp_core.errors import *
from mdp_core.evaluation import *
from mdp_core.ggm import *
from mdp_core.leakage import *
from mdp_core.lp import *
from mdp_core.mechanisms import *
from mdp_core.metrics import *
from mdp_core.pipeline import *
from mdp_core.tasks import *

_MODULES = (adequacy, allocation, data, dependency, errors, evaluation, ggm, leakage, lp, mechanisms, metrics,
            pipeline, tasks)  # fmt: skip
__all__ = sorted({name for module in _MODULES for name in module.__all__})
__version__ = "0.1.0"
