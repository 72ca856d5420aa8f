"""Architecture rules (DESIGN.md "Layout"): no import cycle in mdp_core, names kept, modules stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import mdp_core

CORE = Path(mdp_core.__file__).resolve().parent

#: Every name of mdp_core.__all__ before the move into subpackages: users' code keeps working.
NAMES_BEFORE_MOVE = [
    "BASELINES", "BaselineResult", "BudgetAllocation", "BudgetCalibration", "CRITERIA", "ComposedMechanism",
    "DATA_DIR", "DELTA", "DataError", "DepHDPConfig", "DepHDPResult", "DependencyTriad", "Encoded",
    "EvaluationResult", "GroupProfile", "INTERACTIVE_ROW_LIMIT", "Kind", "LoadReport", "MAX_FILE_BYTES",
    "METHODS", "METHODS_EVALUATED", "Mechanism", "MechanismResult", "PairwiseLeakage", "Schema",
    "ShapeChoice", "ShapeHeatmap", "Surrogate", "TASKS", "Task", "VectorScale", "allocate_budget",
    "bayesian_remap", "budget_norm", "calibrate_budgets", "chain_free_pairs", "clear_profile_cache",
    "compose_mechanism", "conditional", "cpl_exact", "cpl_from_hull", "cpl_hull", "dependency_graph",
    "dependency_groups", "dependency_triad", "discretize", "dt_cpl", "dual_exponent", "entropy_change",
    "entropy_loss", "evaluate_dephdp", "expected_loss", "exponential_mechanism", "ggm_delta",
    "ggm_delta_vector_bounds", "ggm_logpdf", "ggm_moment", "ggm_pdf", "ggm_sample", "ggm_scale",
    "ggm_scale_curve", "ggm_scale_vector", "ggm_second_moment", "ggm_tolerance", "greatest_convex_minorant",
    "group_domain_size", "infer_schema", "joint_codes", "leakage_matrix", "least_convex_majorant",
    "list_datasets", "load_dataset", "load_dataset_report", "loss_budget_curves", "make_task",
    "marginal_tv", "mdp_violation", "mse_likeness", "nmi_matrix", "nmi_pairs", "nominal_distance",
    "numeric_distance", "optimal_mechanism", "optimal_mechanisms", "ordinal_distance", "pairwise_leakage",
    "pl_value", "population_metrics", "product_distance", "radial_fit", "release_attributes",
    "remap_outputs", "repair_mechanism", "run_dephdp", "sample", "select_mechanism", "select_shape",
    "shape_heatmap", "shifted_envelopes", "source_conditionals", "sparse_pairs", "split_encoded",
    "total_correlation_change", "total_leakage", "uncertainty_from_sources", "uniform_split"
]  # fmt: skip


def _module_name(path: Path, root: Path = CORE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    top = name.split(".")[0]
    """Core modules imported by the module at ``path`` (absolute and relative, any depth in the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in out if m.split(".")[0] == top}


def import_graph(root: Path = CORE) -> nx.DiGraph:
    """Directed graph module -> imported module over the package at ``root`` (imports anywhere in a file,
    call-time ones included: a private module importing its re-exporting package closes a cycle)."""
    modules = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, dep) for dep in _imports(path, name) if dep in modules and dep != name)
    return graph


def test_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import cycles in mdp_core: {cycles[:5]}"


def test_the_cycle_check_finds_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.sub import x\n")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub._a import x\n")
    (pkg / "sub" / "_a.py").write_text("def x():\n    from pkg.sub import _b\n")
    (pkg / "sub" / "_b.py").write_text("from ._a import x\n")
    cycles = sorted(sorted(c) for c in nx.simple_cycles(import_graph(pkg)))
    # _a <-> _b, and _a importing the package that re-exports it (the layout rule forbids both)
    assert cycles == [["pkg.sub", "pkg.sub._a"], ["pkg.sub._a", "pkg.sub._b"]]


def test_every_name_from_before_the_move_is_still_exported() -> None:
    missing = [n for n in NAMES_BEFORE_MOVE if n not in mdp_core.__all__ or not hasattr(mdp_core, n)]
    assert not missing


def test_all_is_a_literal_list_in_every_package() -> None:
    for init in CORE.rglob("__init__.py"):
        tree = ast.parse(init.read_text())
        assigns = [n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "__all__"]
        assert len(assigns) == 1, init
        names = ast.literal_eval(assigns[0].value)
        assert names and len(names) == len(set(names)), init


def test_no_core_module_is_over_450_lines() -> None:
    long = {p.name: n for p in CORE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 450}
    assert not long


def test_every_subpackage_name_is_exported_at_the_top_level() -> None:
    for package in ("data", "mechanisms", "dephdp", "leakage", "noise", "release", "sweep"):
        module = __import__(f"mdp_core.{package}", fromlist=["__all__"])
        missing = sorted(set(module.__all__) - set(mdp_core.__all__))
        assert not missing, f"mdp_core.{package} names missing from mdp_core.__all__: {missing}"
