"""PNG plots of a run's per-epoch metrics: what a curriculum did, as curves rather than logs.

Input is a `MetricsRecorder`, a `metrics.jsonl` path or a list of per-epoch metric dicts; the
x-axis is `metric/agent_step`, which the harness's runners count in episodes completed (the
axis says so). Figures are drawn with matplotlib's Agg canvas directly (no pyplot, no global
backend switch, no display needed), so plotting is safe in tests, worker processes and
headless CI.

Lines that often lie on top of each other (mastered tasks all at 1.0, labels with the same
learning progress) differ in line style and marker as well as colour; counts (tasks
mastered) are drawn as steps; `write_plots(..., runner=...)` names the runner in every title.

- `task_performance.png`: the student's performance per task (`env_task_dependency/performance/*`)
- `sampling_share.png`: share of each epoch's episodes per label, stacked (`per_label_samples/*`)
- `lp_scores.png`: learning-progress score per label (`per_label_lp_scores/*`)
- `gini.png`: pool occupancy, pool LP and sampling Gini coefficients
- `overview.png`: episode reward, mean performance and tasks mastered
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from curriculum.stats import PER_LABEL_LP_SCORES, PER_LABEL_SAMPLES, stat_key
from harness.recorder import MetricsRecorder

__all__ = [
    "PLOT_FILES",
    "TITLES",
    "load_epochs",
    "plot_task_performance",
    "plot_sampling_share",
    "plot_lp_scores",
    "plot_gini",
    "plot_overview",
    "write_plots",
    "series_style",
    "X_LABEL",
]

X_KEY: Final = "metric/agent_step"
PERFORMANCE_PREFIX: Final = "env_task_dependency/performance/"
"""Per-task student performance, `<prefix>task_<i>` (written by `harness.runners`)."""
MEAN_PERFORMANCE_KEY: Final = "env_task_dependency/mean_performance"
NUM_MASTERED_KEY: Final = "env_task_dependency/num_mastered"
REWARD_KEY: Final = "overview/reward"
SAMPLES_PREFIX: Final = f"env_{stat_key(PER_LABEL_SAMPLES)}/"
LP_PREFIX: Final = f"env_{stat_key(PER_LABEL_LP_SCORES)}/"
GINI_KEYS: Final = {
    f"env_{stat_key('pool_occupancy_gini')}": "pool occupancy (completions per active task)",
    f"env_{stat_key('pool_lp_gini')}": "pool learning progress (LP per active task)",
    f"env_{stat_key('sampling_gini')}": "sampling (episodes per active task)",
}
MAX_LEGEND_SERIES: Final = 12
"""Beyond this many series a legend is unreadable: the rest are grouped or shown by colour."""

SHARE_POINTS: Final = 60
"""The sampling-share plot pools neighbouring epochs so it shows about this many points:
a single short epoch is too few episodes for a share to mean much."""

_DPI: Final = 110
_WIDE: Final = (10.0, 5.2)

TITLES: Final = {
    "task_performance.png": "Student performance per task",
    "sampling_share.png": "Sampling share per label",
    "lp_scores.png": "Learning progress per label",
    "gini.png": "Gini coefficients (0 = spread evenly, 1 = all on one task)",
    "overview.png": "Overview: reward, performance and mastery",
}
"""Default title of each plot file."""

Epochs = list[dict[str, Any]]
MetricsSource = MetricsRecorder | str | Path | Sequence[Mapping[str, Any]]


def load_epochs(source: MetricsSource) -> Epochs:
    """Per-epoch metric dicts from a recorder, a `metrics.jsonl` file or a list of dicts."""
    if isinstance(source, MetricsRecorder):
        return list(source.epochs)
    if isinstance(source, (str, Path)):
        path = Path(source)
        with path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    return [dict(epoch) for epoch in source]


def _natural_key(text: str) -> list[Any]:
    """`task_2` before `task_10`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _suffixes(epochs: Epochs, prefix: str) -> list[str]:
    found = {key[len(prefix):] for epoch in epochs for key in epoch if key.startswith(prefix)}
    return sorted((s for s in found if "/" not in s), key=_natural_key)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


X_LABEL: Final = f"episodes completed ({X_KEY})"
"""What the x-axis counts: the harness's runners count `metric/agent_step` in episodes."""

_LINE_STYLES: Final = ("-", "--", "-.", ":")
_MARKERS: Final = ("o", "s", "^", "D", "v", "P", "X", "*")
_MARKS_PER_LINE: Final = 8


def _x(epochs: Epochs) -> tuple[list[float], str]:
    if all(X_KEY in epoch for epoch in epochs):
        return [_number(epoch[X_KEY]) for epoch in epochs], X_LABEL
    return list(range(len(epochs))), "epoch"


def series_style(index: int, count: int, points: int) -> dict[str, Any]:
    """Line style and markers of series `index` of `count`: overlapping series stay apart.

    Markers sit at staggered points of each line (series i starts i points later), so lines
    drawn on top of each other still show every series' marker.
    """
    every = max(1, points // _MARKS_PER_LINE)
    return {
        "linestyle": _LINE_STYLES[index % len(_LINE_STYLES)],
        "marker": _MARKERS[index % len(_MARKERS)],
        "markevery": (min(index * max(1, every // max(count, 1)), max(points - 1, 0)), every),
        "markersize": 4,
    }


def _new_figure(size: tuple[float, float] = _WIDE) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _colours(count: int) -> list[Any]:
    from matplotlib import colormaps

    if count <= 10:
        return [colormaps["tab10"](i) for i in range(count)]
    if count <= 20:
        return [colormaps["tab20"](i) for i in range(count)]
    return [colormaps["viridis"](i / max(1, count - 1)) for i in range(count)]


def _legend(axes: Any, title: str | None = None) -> None:
    handles, labels = axes.get_legend_handles_labels()
    if not handles:
        return
    axes.legend(
        handles, labels, title=title, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
        title_fontsize="small", frameon=False, ncols=1 if len(handles) <= 16 else 2,
    )


def _save(figure: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path


def _empty(axes: Any, what: str) -> None:
    axes.text(0.5, 0.5, f"no {what} in these metrics", ha="center", va="center", transform=axes.transAxes,
              color="grey")
    axes.set_xticks([])
    axes.set_yticks([])


def plot_task_performance(source: MetricsSource, path: str | Path, *, title: str | None = None) -> Path:
    """The student's performance per task over time, with the mastery region shaded."""
    epochs = load_epochs(source)
    tasks = _suffixes(epochs, PERFORMANCE_PREFIX)
    x, x_label = _x(epochs)
    figure = _new_figure()
    axes = figure.add_subplot()
    if not tasks:
        _empty(axes, "per-task performance")
    colours = _colours(len(tasks))
    for index, (task, colour) in enumerate(zip(tasks, colours)):
        axes.plot(x, [_number(e.get(PERFORMANCE_PREFIX + task)) for e in epochs], color=colour, label=task,
                  linewidth=1.6, **series_style(index, len(tasks), len(x)))
    if tasks:
        axes.set_ylim(-0.02, 1.02)
        axes.set_xlabel(x_label)
        axes.set_ylabel("performance (0 = untrained, 1 = perfect)")
        axes.grid(alpha=0.3)
        if len(tasks) <= MAX_LEGEND_SERIES * 2:
            _legend(axes, "task")
        else:
            _colourbar(figure, axes, len(tasks), "task index")
    axes.set_title(title or TITLES["task_performance.png"])
    return _save(figure, Path(path))


def _colourbar(figure: Any, axes: Any, count: int, label: str) -> None:
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    mappable = ScalarMappable(Normalize(0, count - 1), colormaps["viridis"])
    figure.colorbar(mappable, ax=axes, label=label)


def _sampling_groups(epochs: Epochs) -> tuple[list[str], Callable[[Mapping[str, Any]], list[float]]]:
    """Labels to stack (the busiest ones, then 'other') and a function giving one epoch's counts."""
    labels = _suffixes(epochs, SAMPLES_PREFIX)
    if len(labels) <= MAX_LEGEND_SERIES:
        return labels, lambda e: [_number(e.get(SAMPLES_PREFIX + label, 0)) for label in labels]
    totals = {label: sum(_number(e.get(SAMPLES_PREFIX + label, 0)) for e in epochs) for label in labels}
    keep = sorted(sorted(labels, key=lambda s: -totals[s])[: MAX_LEGEND_SERIES - 1], key=_natural_key)
    rest = [label for label in labels if label not in keep]

    def counts(epoch: Mapping[str, Any]) -> list[float]:
        kept = [_number(epoch.get(SAMPLES_PREFIX + label, 0)) for label in keep]
        return kept + [sum(_number(epoch.get(SAMPLES_PREFIX + label, 0)) for label in rest)]

    return keep + [f"other ({len(rest)} labels)"], counts


def plot_sampling_share(source: MetricsSource, path: str | Path, *, title: str | None = None) -> Path:
    """Share of each epoch's episodes that went to each label, stacked to 100%."""
    epochs = load_epochs(source)
    labels, counts = _sampling_groups(epochs)
    x, x_label = _x(epochs)
    figure = _new_figure()
    axes = figure.add_subplot()
    if not labels:
        _empty(axes, "per-label sample counts")
    else:
        rows = [[0.0 if math.isnan(c) else c for c in counts(epoch)] for epoch in epochs]
        window = max(1, math.ceil(len(rows) / SHARE_POINTS))
        rows = _rolling_sums(rows, window)
        totals = [sum(row) for row in rows]
        shares = [[row[i] / total if total > 0 else 0.0 for row, total in zip(rows, totals)]
                  for i in range(len(labels))]
        axes.stackplot(x, shares, labels=labels, colors=_colours(len(labels)), alpha=0.95, linewidth=0)
        axes.set_ylim(0.0, 1.0)
        if len(x) > 1:
            axes.set_xlim(min(x), max(x))
        axes.set_xlabel(x_label)
        smoothing = f", pooled over {window} epochs" if window > 1 else ""
        axes.set_ylabel(f"share of episodes{smoothing}")
        axes.yaxis.set_major_formatter(_percent())
        handles, names = axes.get_legend_handles_labels()
        axes.legend(handles[::-1], names[::-1], title="label", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                    fontsize="small", title_fontsize="small", frameon=False)
    axes.set_title(title or TITLES["sampling_share.png"])
    return _save(figure, Path(path))


def _rolling_sums(rows: list[list[float]], window: int) -> list[list[float]]:
    """Per column, the sum over a centred window of `window` rows (shorter at the ends)."""
    if window <= 1:
        return rows
    half_before, half_after = (window - 1) // 2, window // 2
    out = []
    for i in range(len(rows)):
        block = rows[max(0, i - half_before): i + half_after + 1]
        out.append([sum(column) for column in zip(*block)])
    return out


def _percent() -> Any:
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(xmax=1.0, decimals=0)


def plot_lp_scores(source: MetricsSource, path: str | Path, *, title: str | None = None) -> Path:
    """Mean learning-progress score of each label's active tasks over time."""
    epochs = load_epochs(source)
    labels = _suffixes(epochs, LP_PREFIX)
    x, x_label = _x(epochs)
    figure = _new_figure()
    axes = figure.add_subplot()
    if not labels:
        _empty(axes, "per-label LP scores (the algorithm may not compute learning progress)")
    colours = _colours(len(labels))
    for index, (label, colour) in enumerate(zip(labels, colours)):
        axes.plot(x, [_number(e.get(LP_PREFIX + label)) for e in epochs], color=colour, label=label, linewidth=1.4,
                  **series_style(index, len(labels), len(x)))
    if labels:
        axes.set_xlabel(x_label)
        axes.set_ylabel("learning-progress score")
        axes.grid(alpha=0.3)
        if len(labels) <= MAX_LEGEND_SERIES * 2:
            _legend(axes, "label")
        else:
            _colourbar(figure, axes, len(labels), "label (natural order)")
    axes.set_title(title or TITLES["lp_scores.png"])
    return _save(figure, Path(path))


def plot_gini(source: MetricsSource, path: str | Path, *, title: str | None = None) -> Path:
    """Gini coefficients over time: 0 = spread evenly over the pool, 1 = all on one task."""
    epochs = load_epochs(source)
    x, x_label = _x(epochs)
    figure = _new_figure((10.0, 4.6))
    axes = figure.add_subplot()
    drawn = 0
    for index, ((key, name), colour) in enumerate(zip(GINI_KEYS.items(), _colours(len(GINI_KEYS)))):
        if any(key in e for e in epochs):  # sampling often coincides with occupancy: styles keep them apart
            axes.plot(x, [_number(e.get(key)) for e in epochs], color=colour, label=name, linewidth=1.5,
                      **series_style(index, len(GINI_KEYS), len(x)))
            drawn += 1
    if drawn:
        axes.set_ylim(-0.02, 1.02)
        axes.set_xlabel(x_label)
        axes.set_ylabel("Gini coefficient")
        axes.grid(alpha=0.3)
        axes.legend(loc="lower right", fontsize="small", framealpha=0.9)
    else:
        _empty(axes, "Gini coefficients")
    axes.set_title(title or TITLES["gini.png"])
    return _save(figure, Path(path))


def plot_overview(source: MetricsSource, path: str | Path, *, title: str | None = None) -> Path:
    """Mean episode reward and mean performance (left axis), tasks mastered (right axis)."""
    epochs = load_epochs(source)
    x, x_label = _x(epochs)
    figure = _new_figure((10.0, 4.6))
    axes = figure.add_subplot()
    series = {
        REWARD_KEY: ("mean episode score", "tab:blue"),
        MEAN_PERFORMANCE_KEY: ("mean performance over tasks", "tab:green"),
    }
    lines = []
    for key, (name, colour) in series.items():
        if any(key in e for e in epochs):
            lines += axes.plot(x, [_number(e.get(key)) for e in epochs], color=colour, label=name, linewidth=1.6)
    axes.set_ylim(-0.02, 1.02)
    axes.set_xlabel(x_label)
    axes.set_ylabel("reward / performance")
    axes.grid(alpha=0.3)
    mastered_key = NUM_MASTERED_KEY
    if any(mastered_key in e for e in epochs):
        right = axes.twinx()
        lines += right.plot(x, [_number(e.get(mastered_key)) for e in epochs], color="tab:red", linestyle="--",
                            label="tasks mastered (mean over the epoch's episodes)", linewidth=1.4,
                            drawstyle="steps-post")
        right.set_ylabel("tasks mastered")
        right.set_ylim(bottom=0)
        right.yaxis.get_major_locator().set_params(integer=True)
    if lines:
        axes.legend(lines, [line.get_label() for line in lines], loc="lower right", fontsize="small",
                    framealpha=0.9)
    axes.set_title(title or TITLES["overview.png"])
    return _save(figure, Path(path))


PLOT_FILES: Final[dict[str, Callable[..., Path]]] = {
    "task_performance.png": plot_task_performance,
    "sampling_share.png": plot_sampling_share,
    "lp_scores.png": plot_lp_scores,
    "gini.png": plot_gini,
    "overview.png": plot_overview,
}
"""File name -> plotting function; `write_plots` writes all of them."""


def write_plots(source: MetricsSource, out_dir: str | Path, *, title: str | None = None,
                runner: str | None = None) -> list[Path]:
    """Write every plot of `PLOT_FILES` into `out_dir`; `title` (a run name) and `runner` (what
    made the metrics, e.g. "direct runner") are added to each plot's title."""
    epochs = load_epochs(source)
    out = Path(out_dir)
    about = "; ".join(part for part in (title, runner) if part)
    written = []
    for name, plot in PLOT_FILES.items():
        written.append(plot(epochs, out / name, title=f"{TITLES[name]}\n({about})" if about else None))
    return written


