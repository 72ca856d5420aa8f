"""Figures and texts for the data & dependencies page."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import networkx as nx
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
from scipy.spatial.distance import squareform

import mdp_core as core
from ui.markdown import md

__all__ = [
    "GRAPH_CAPTION",
    "dependency_order",
    "dephdp_groups_caption",
    "graph_figure",
    "group_colour",
    "label_box",
    "label_extent",
    "nmi_heatmap",
    "sparse_pairs_warning",
    "table_height",
]

_PALETTE = list(qualitative.Dark24)  # 24 distinct colours: groups beyond that repeat them
PLOT_WIDTH, PLOT_HEIGHT = 320.0, 470.0  # smallest plot area (px) the graph's labels are fitted into
PAD_PIXELS = 8.0  # free room between the outermost label and the plot's edge
_OUTSIDE_COST = 4.0  # a label's px^2 outside the plot count 4 times those over another label or node
_EDGE_COST = 12.0  # a label over 4 px of an edge counts like 12 px^2 over another label or node
_FONT_SIZE, _CHAR_WIDTH, _LINE_HEIGHT = 12, 7.0, 15.0  # label font (px) and its estimated width / height
_ROW_PIXELS, _HEADER_PIXELS = 35, 38  # st.dataframe's default row height and its header (with borders)


def table_height(rows: int, most: int = 300) -> int:
    """Pixel height of an st.dataframe showing ``rows`` rows: all of them up to ``most`` px (then it
    scrolls); a fixed height left empty rows under a short table (one pair: 7 blank rows)."""
    return min(most, _HEADER_PIXELS + _ROW_PIXELS * max(rows, 1))


GRAPH_CAPTION = (
    "Node colour: group (legend); node size: the attribute's number of levels (log scale); edge: NMI above "
    "τ_group, wider for stronger dependence. Hover a node or an edge for its numbers."
)


def dependency_order(nmi: pd.DataFrame) -> list[str]:
    """Attribute order that puts dependent attributes next to each other (average linkage on 1 - NMI,
    optimal leaf ordering)."""
    names = list(nmi.columns)
    if len(names) < 3:
        return names
    dist = squareform(np.clip(1.0 - nmi.to_numpy(), 0.0, 1.0), checks=False)
    tree = optimal_leaf_ordering(linkage(dist, method="average"), dist)
    return [names[i] for i in leaves_list(tree)]


def nmi_heatmap(nmi: pd.DataFrame) -> go.Figure:
    """Off-diagonal NMI (the diagonal, always 1, is blank so that weak dependencies stay visible)."""
    order = dependency_order(nmi)
    values = nmi.loc[order, order].to_numpy().copy()
    np.fill_diagonal(values, np.nan)
    top = float(np.nanmax(values)) if len(order) > 1 else 1.0
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=order,
            y=order,
            zmin=0,
            zmax=max(top, 0.05),
            colorscale="Blues",
            hovertemplate="%{y} – %{x}: NMI %{z:.3f}<extra></extra>",
            colorbar={"title": "NMI"},
        )
    )
    fig.update_layout(
        height=520,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        yaxis_autorange="reversed",
        title="Normalised mutual information (ordered by dependency)",
    )
    return fig


def graph_figure(
    graph: nx.Graph, groups: list[tuple[str, ...]], domain_sizes: dict[str, int], *, seed: int = 0
) -> go.Figure:
    """Dependency graph: node colour = group, node size = levels (log), edge width = NMI, hover shows sizes
    and weights.

    Labels point away from the layout's centre (and sideways when that spot is taken by another label), and
    the axis ranges are padded so that every label fits inside a plot of at least :data:`PLOT_WIDTH` x
    :data:`PLOT_HEIGHT` pixels; text may still spill into the margins rather than be clipped."""
    names = list(graph.nodes)
    raw = nx.spring_layout(graph, seed=seed, weight="weight", k=1.6 / max(np.sqrt(len(graph)), 1))
    pos = _normalised(raw, names)
    sizes = {a: 14 + 3 * np.log2(max(domain_sizes[a], 1)) for a in names}
    edges = list(graph.edges)
    x_range = y_range = (-1.45, 1.45)  # a first guess: the nodes on 70 % of the plot
    for _ in range(3):  # place the labels on the plot these ranges give, then fit the ranges to them
        places = _label_places(pos, sizes, edges, x_range, y_range)
        x_range, y_range = _padded_ranges(pos, sizes, places)
    fig = go.Figure()
    for a, b, w in graph.edges(data="weight"):
        (x0, y0), (x1, y1) = pos[a], pos[b]
        fig.add_trace(
            go.Scatter(
                x=[x0, x1],
                y=[y0, y1],
                mode="lines",
                hoverinfo="skip",
                showlegend=False,
                line={"width": 1 + 12 * w, "color": "rgba(90,90,90,0.45)"},
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[(x0 + x1) / 2],
                y=[(y0 + y1) / 2],
                mode="markers",
                showlegend=False,
                marker={"size": 10, "opacity": 0},
                hovertemplate=f"{a} – {b}: NMI {w:.3f}<extra></extra>",
            )
        )
    for k, group in enumerate(groups):
        fig.add_trace(
            go.Scatter(
                x=[pos[a][0] for a in group],
                y=[pos[a][1] for a in group],
                mode="markers+text",
                text=list(group),
                textposition=[places[a] for a in group],
                textfont={"size": _FONT_SIZE},
                cliponaxis=False,
                name=f"G{k + 1}",
                marker={
                    "size": [sizes[a] for a in group],
                    "color": group_colour(k),
                    "line": {"width": 1, "color": "white"},
                },
                hovertemplate=[
                    f"{a}<br>{domain_sizes[a]:,} levels<br>group G{k + 1}<extra></extra>" for a in group
                ],
            )
        )
    fig.update_layout(
        height=520,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title="Dependency graph",
        xaxis={"visible": False, "range": list(x_range), "autorange": False, "fixedrange": False},
        yaxis={"visible": False, "range": list(y_range), "autorange": False},
        legend_title="group",
    )
    return fig


def group_colour(k: int) -> str:
    """Colour of group ``k`` (0-based): 24 distinct colours, then they repeat (the hover names the group)."""
    return _PALETTE[k % len(_PALETTE)]


def label_extent(text: str, place: str, marker_size: float) -> tuple[float, float, float, float]:
    """Estimated box (left, right, bottom, top) in pixels, relative to its node's centre, that a node and
    its label drawn at ``place`` (a plotly textposition) cover together."""
    r = marker_size / 2
    left, right, bottom, top = label_box(text, place, marker_size)
    return min(left, -r), max(right, r), min(bottom, -r), max(top, r)


# plotly textpositions by outward direction, counter-clockwise from "east" in steps of 45 degrees
_DIRECTIONS = (
    "middle right",
    "top right",
    "top center",
    "top left",
    "middle left",
    "bottom left",
    "bottom center",
    "bottom right",
)


def label_box(text: str, place: str, marker_size: float) -> tuple[float, float, float, float]:
    """Estimated box (left, right, bottom, top) in pixels, relative to its node's centre, of a label."""
    r = marker_size / 2
    w, h = _CHAR_WIDTH * len(text), _LINE_HEIGHT
    vertical, horizontal = place.split()
    left = {"left": -(r + w), "right": r, "center": -w / 2}[horizontal]
    bottom = {"top": r, "bottom": -(r + h), "middle": -h / 2}[vertical]
    return left, left + w, bottom, bottom + h


def _normalised(raw: dict, names: list[str]) -> dict[str, tuple[float, float]]:
    """Layout scaled to [-1, 1] on its longer side, centred on the origin."""
    if not names:
        return {}
    xy = np.array([raw[a] for a in names], dtype=float)
    xy -= (xy.max(axis=0) + xy.min(axis=0)) / 2
    scale = float(np.abs(xy).max())
    if scale > 0:
        xy /= scale
    return {a: (float(x), float(y)) for a, (x, y) in zip(names, xy, strict=True)}


def _overlap(p: tuple[float, float, float, float], q: tuple[float, float, float, float]) -> float:
    """Area shared by two boxes (left, right, bottom, top)."""
    return max(0.0, min(p[1], q[1]) - max(p[0], q[0])) * max(0.0, min(p[3], q[3]) - max(p[2], q[2]))


def _label_places(
    pos: dict[str, tuple[float, float]],
    sizes: dict[str, float],
    edges: list[tuple[str, str]],
    x_range: tuple[float, float],
    y_range: tuple[float, float],
) -> dict[str, str]:
    """Each node's textposition: pointing away from the centre, else the nearest direction whose label
    stays inside the plot and covers the least of the other nodes, of the labels placed before (nodes far
    from the centre first) and of the edges, on a plot of PLOT_WIDTH x PLOT_HEIGHT pixels over these
    ranges."""
    sx, sy = PLOT_WIDTH / (x_range[1] - x_range[0]), PLOT_HEIGHT / (y_range[1] - y_range[0])
    px = {a: ((x - x_range[0]) * sx, (y - y_range[0]) * sy) for a, (x, y) in pos.items()}
    inside = (PAD_PIXELS, PLOT_WIDTH - PAD_PIXELS, PAD_PIXELS, PLOT_HEIGHT - PAD_PIXELS)
    centre = (-x_range[0] * sx, -y_range[0] * sy)  # the layout is centred on the origin
    ex, ey = _edge_points(px, sizes, edges)
    markers = {
        a: (x - sizes[a] / 2, x + sizes[a] / 2, y - sizes[a] / 2, y + sizes[a] / 2)
        for a, (x, y) in px.items()
    }
    labels: list[tuple[float, float, float, float]] = []
    places: dict[str, str] = {}
    for a in sorted(pos, key=lambda a: -np.hypot(*pos[a])):
        x, y = px[a]
        dx, dy = x - centre[0], y - centre[1]
        outward = round(float(np.arctan2(dy, dx)) / (np.pi / 4)) % 8 if np.hypot(dx, dy) > 1 else 2
        best: tuple[float, int, tuple[float, float, float, float]] | None = None
        for step in (0, 1, -1, 2, -2, 3, -3, 4):
            d = (outward + step) % 8
            left, right, bottom, top = label_box(a, _DIRECTIONS[d], sizes[a])
            box = (x + left, x + right, y + bottom, y + top)
            area = (box[1] - box[0]) * (box[3] - box[2])
            covered = _OUTSIDE_COST * (area - _overlap(box, inside))
            covered += sum(_overlap(box, m) for b, m in markers.items() if b != a)
            covered += sum(_overlap(box, other) for other in labels)
            covered += _EDGE_COST * int(
                np.count_nonzero((ex >= box[0]) & (ex <= box[1]) & (ey >= box[2]) & (ey <= box[3]))
            )
            if best is None or covered < best[0] - 1e-9:
                best = (covered, d, box)
            if covered == 0:
                break
        assert best is not None
        places[a] = _DIRECTIONS[best[1]]
        labels.append(best[2])
    return places


def _edge_points(
    px: dict[str, tuple[float, float]], sizes: dict[str, float], edges: list[tuple[str, str]]
) -> tuple[np.ndarray, np.ndarray]:
    """Points every few pixels along the edges' visible parts (outside their end nodes' markers)."""
    xs, ys = [np.empty(0)], [np.empty(0)]
    for a, b in edges:
        (x0, y0), (x1, y1) = px[a], px[b]
        length = float(np.hypot(x1 - x0, y1 - y0))
        if length <= (sizes[a] + sizes[b]) / 2:
            continue
        t = np.linspace(sizes[a] / 2 / length, 1 - sizes[b] / 2 / length, max(int(length / 4), 2))
        xs.append(x0 + t * (x1 - x0))
        ys.append(y0 + t * (y1 - y0))
    return np.concatenate(xs), np.concatenate(ys)


def _padded_ranges(
    pos: dict[str, tuple[float, float]], sizes: dict[str, float], places: dict[str, str]
) -> tuple[tuple[float, float], tuple[float, float]]:
    """x and y axis ranges that hold every node with its label on a plot of PLOT_WIDTH x PLOT_HEIGHT pixels,
    plus a margin of PAD_PIXELS."""
    if not pos:
        return (-1.0, 1.0), (-1.0, 1.0)
    extents = {a: label_extent(a, places[a], sizes[a]) for a in pos}
    x_range = _padded_axis(
        {a: p[0] for a, p in pos.items()}, {a: (e[0], e[1]) for a, e in extents.items()}, PLOT_WIDTH
    )
    y_range = _padded_axis(
        {a: p[1] for a, p in pos.items()}, {a: (e[2], e[3]) for a, e in extents.items()}, PLOT_HEIGHT
    )
    return x_range, y_range


def _padded_axis(
    coord: dict[str, float], extent: dict[str, tuple[float, float]], pixels: float
) -> tuple[float, float]:
    """Range [lo, hi] of one axis such that, drawn over ``pixels``, every node keeps its extent (pixels below
    and above it) plus PAD_PIXELS inside the range: the nodes get the widest stretch of pixels that leaves
    that room (at least a quarter of them)."""
    lo_node, hi_node = min(coord.values()), max(coord.values())
    if hi_node - lo_node < 1e-9:
        lo_node, hi_node = lo_node - 0.5, hi_node + 0.5
    span = hi_node - lo_node
    unit = {a: (c - lo_node) / span for a, c in coord.items()}  # 0 .. 1 across the nodes

    def room(inner: float) -> tuple[float, float]:  # pixels needed below the lowest / above the highest node
        below = max(PAD_PIXELS - extent[a][0] - unit[a] * inner for a in coord)
        above = max(PAD_PIXELS + extent[a][1] - (1 - unit[a]) * inner for a in coord)
        return max(below, PAD_PIXELS), max(above, PAD_PIXELS)

    lo, hi = 0.25 * pixels, pixels  # inner + sum(room(inner)) never decreases: bisect for the largest fit
    if lo + sum(room(lo)) <= pixels:
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if mid + sum(room(mid)) <= pixels else (lo, mid)
    below, above = room(lo)
    return lo_node - below / lo * span, hi_node + above / lo * span


# --- texts ---------------------------------------------------------------------------------------------
def sparse_pairs_warning(
    sparse: pd.DataFrame,
    domain_sizes: Mapping[str, int],
    numeric: Collection[str],
    n_rows: int,
    *,
    min_per_cell: float,
    shown: int = 3,
) -> str:
    """The warning for :func:`mdp_core.sparse_pairs`' result: which pairs (the sparsest ``shown``, then "and
    N more"), how biased, and which numeric attributes' bin counts to lower to what (or, when bins cannot
    help, that those pairs need more rows)."""
    pairs = list(zip(sparse["a"], sparse["b"], strict=True))
    named = [f"({md(a)}, {md(b)})" for a, b in pairs[:shown]]
    more = len(pairs) - len(named)
    listed = _and(named + ([f"{more} more"] if more else []))
    fewest = float(sparse["rows_per_cell"].min())
    text = (
        f"{len(pairs)} attribute pair{'s' if len(pairs) != 1 else ''} {'have' if len(pairs) != 1 else 'has'} "
        f"fewer than {min_per_cell:g} rows per contingency cell ({fewest:.1f} at the fewest): {listed}. "
        f"Their estimated MI is biased upward (by up to {float(sparse['mi_bias'].max()):.3f} nats), so the "
        "graph may show spurious dependencies."
    )
    lower, left = core.fewer_bins(pairs, domain_sizes, numeric, n_rows / min_per_cell)
    if lower:
        by_count: dict[int, list[str]] = {}
        for a, count in lower.items():
            by_count.setdefault(count, []).append(f"**{md(a)}**")
        steps = "; ".join(f"{_and(attrs)} to {count}" for count, attrs in by_count.items())
        text += f" To fix: in the Attributes table above, lower the bins of {steps}."
    if left:
        stuck = _and(
            [f"({md(a)}, {md(b)})" for a, b in left[:shown]]
            + ([f"{len(left) - shown} more"] if len(left) > shown else [])
        )
        text += (
            f" {'Also' if lower else 'To fix'}: fewer bins cannot help {stuck}; exclude one attribute of "
            "each pair or use more rows."
        )
    return text


def dephdp_groups_caption(
    nmi: pd.DataFrame,
    tau: float,
    shown: int,
    domain_sizes: Mapping[str, int],
    *,
    target: str | None,
    max_group_domain: int,
) -> str:
    """Why the DepHDP page can show a different number of groups at the same tau_group, with the counts
    each of its differences gives on this table: it leaves the target out, splits groups above
    ``max_group_domain`` joint values, and measures NMI on its fitting split only."""
    released = [c for c in nmi.columns if c != target]
    sub = nmi.loc[released, released]
    parts = [f"This page: {shown} group{'s' if shown != 1 else ''} over all {len(nmi.columns)} attributes."]
    if not released:
        return parts[0] + " The DepHDP page never releases the target, so it has no group here."
    plain = len(core.dependency_groups(sub, tau))
    split = len(core.dependency_groups(sub, tau, domain_sizes=domain_sizes, max_domain=max_group_domain))
    if target is not None:
        parts.append(
            f"The DepHDP page never releases the target **{md(target)}**, so it groups the other "
            f"{len(released)} only: {plain} group{'s' if plain != 1 else ''}"
            + (" (the target linked attributes that are otherwise apart)." if plain > shown else ".")
        )
    else:
        parts.append(
            f"The DepHDP page groups the same {len(released)} attributes: "
            f"{plain} group{'s' if plain != 1 else ''}."
        )
    parts.append(
        f"It then splits every group whose joint domain exceeds {max_group_domain:,} values at its weakest "
        f"edge: {split} group{'s' if split != 1 else ''}."
    )
    parts.append(
        "It also measures NMI on its fitting split only (the rows not held out for evaluation), so a pair "
        "close to τ_group can fall on the other side there."
    )
    return " ".join(parts)


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else "".join(items)
