"""Lab 13's figures: bytes per rank against the world size, all-reduce time against message size,
pipeline schedules as Gantt charts, a data-parallel step's compute and communication per rank, and the training
state per rank by ZeRO stage."""
from __future__ import annotations

from typing import Mapping, Sequence


def plot_bytes_per_rank(measured: Mapping[int, Sequence[int]], n: int, most: int = 8, ax=None):
    """Each rank's measured tensor bytes sent (``measured[world]``: one number per rank, as points) for an
    all-reduce of ``n`` float32 values, against two lines up to ``most`` ranks: the ring's ``2 (p - 1) / p x 4n``
    per rank, and rank 0 of the naive all-reduce (everyone sends rank 0 its tensor, rank 0 sends back the sum:
    ``(p - 1) x 4n`` sent by rank 0). Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    worlds = list(range(1, most + 1))
    ax.plot(worlds, [2 * (p - 1) / p * 4 * n for p in worlds], color="#1f77b4",
            label="ring: 2 (p - 1) / p x 4n per rank")
    ax.plot(worlds, [(p - 1) * 4 * n for p in worlds], color="#d62728", linestyle="--",
            label="naive, rank 0: (p - 1) x 4n")
    ax.axhline(8 * n, color="#1f77b4", alpha=0.3, linewidth=1)
    for world, per_rank in sorted(measured.items()):
        ax.plot([world] * len(per_rank), list(per_rank), "o", color="black", markersize=5,
                label="measured (each rank)" if world == min(measured) else None)
    ax.set_xlabel("ranks p")
    ax.set_ylabel("bytes sent per rank")
    ax.set_title(f"all-reduce of {n:,} float32 values: the ring's bytes per rank stay below 2 x 4n = {8 * n:,}")
    ax.legend(loc="upper left", fontsize=8)
    return ax


def plot_costs(costs: Mapping[str, Sequence[float]], sizes: Sequence[int], crossover: float | None = None, ax=None,
               title: str = ""):
    """All-reduce time (log-log) against message size: ``costs[algorithm][i]`` seconds at ``sizes[i]`` bytes,
    the crossover marked. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for (name, seconds), color in zip(costs.items(), ("#1f77b4", "#2ca02c", "#d62728")):
        ax.loglog(sizes, seconds, label=name, color=color)
    if crossover:
        ax.axvline(crossover, color="black", linestyle=":", label=f"crossover {crossover:,.0f} B")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("seconds (alpha-beta model)")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def plot_schedule(timelines: Mapping[str, object], axes=None):
    """One Gantt chart per replayed schedule (:class:`util.labs.lab13.pipeline.Timeline`): a row per stage, a
    box per operation (forward light, backward dark, the micro-batch written in it), idle time left white.
    Returns the axes."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(len(timelines), 1, figsize=(12, 1.2 + 0.9 * sum(t.stages for t in timelines.values())
                                                           / max(len(timelines), 1) * len(timelines)), squeeze=False)
        axes = axes[:, 0]
    span = max(t.makespan for t in timelines.values())
    for ax, (name, timeline) in zip(axes, timelines.items()):
        for slot in timeline.slots:
            color = "#9ecae1" if slot.op == "F" else "#08519c"
            ax.broken_barh([(slot.start, slot.end - slot.start)], (slot.stage - 0.4, 0.8), facecolors=color,
                           edgecolors="white")
            ax.text((slot.start + slot.end) / 2, slot.stage, str(slot.micro), ha="center", va="center", fontsize=7,
                    color="black" if slot.op == "F" else "white")
        ax.set_yticks(range(timeline.stages))
        ax.set_yticklabels([f"stage {s}" for s in range(timeline.stages)])
        ax.invert_yaxis()
        ax.set_xlim(0, span)
        ax.set_title(f"{name}: makespan {timeline.makespan}, bubble {timeline.bubble:.1%}, activations held per stage "
                     f"at most {timeline.peak}", fontsize=9)
    axes[-1].set_xlabel("time (a forward takes 1 unit, a backward 2; light: forward, dark: backward)")
    return axes


def plot_timeline(steps: Mapping[str, Sequence[Sequence[Mapping]]], axes=None):
    """One chart per data-parallel step (``steps[title][rank]``: that rank's events from
    :func:`util.labs.lab13.timeline.traced`): per rank, a row of the backward pass's layers (compute) and under it a
    row of the all-reduces in flight (communication), in milliseconds from the step's first event. Overlap is a
    communication box under a compute box. Returns the axes."""
    import matplotlib.pyplot as plt

    if axes is None:
        ranks = max(len(per_rank) for per_rank in steps.values())
        _, axes = plt.subplots(len(steps), 1, figsize=(12, 0.6 + 0.9 * ranks * len(steps)), squeeze=False)
        axes = axes[:, 0]
    for ax, (title, per_rank) in zip(axes, steps.items()):
        events = [e for rank in per_rank for e in rank if e.get("end") is not None]
        zero = min((e["start"] for e in events), default=0.0)
        for rank, rank_events in enumerate(per_rank):
            for event in rank_events:
                if event.get("end") is None:
                    continue
                row = 2 * rank + (0 if event["kind"] == "compute" else 1)
                start, width = 1e3 * (event["start"] - zero), 1e3 * (event["end"] - event["start"])
                ax.broken_barh([(start, max(width, 0.02))], (row - 0.4, 0.8),
                               facecolors="#9ecae1" if event["kind"] == "compute" else "#fd8d3c", edgecolors="white")
                ax.text(start + width / 2, row, str(event["label"]), ha="center", va="center", fontsize=6)
        ax.set_yticks(range(2 * len(per_rank)))
        ax.set_yticklabels([f"rank {r} {lane}" for r in range(len(per_rank)) for lane in ("compute", "all-reduce")])
        ax.invert_yaxis()
        ax.set_title(title, fontsize=9)
    axes[-1].set_xlabel("milliseconds from the first event (blue: a layer's backward; orange: an all-reduce in flight)")
    return axes


def plot_zero_memory(tables: Mapping[str, Sequence[Sequence[Mapping]]], world: int, gib: bool = True, ax=None):
    """Bytes per rank by ZeRO stage: ``tables[name][stage]`` is ``zero_memory``'s (or ``zero_mixed_memory``'s)
    list of per-rank rows at that stage; each row's parts are stacked in one bar per rank and stage, one group of
    bars per accounting. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(12, 4))
    scale = 2 ** 30 if gib else 1
    colors = ("#6baed6", "#fd8d3c", "#74c476", "#9e9ac8")
    ticks, labels, seen = [], [], set()
    x = 0.0
    for name, stages in tables.items():
        for stage, rows in enumerate(stages):
            for row in rows[:world]:
                bottom = 0.0
                for (part, value), color in zip(((k, v) for k, v in row.items() if k != "total"), colors):
                    ax.bar(x, value / scale, 0.8, bottom=bottom, color=color,
                           label=f"{name}: {part}" if (name, part) not in seen else None)
                    seen.add((name, part))
                    bottom += value / scale
                x += 1
            ticks.append(x - (len(rows[:world]) + 1) / 2)
            labels.append(f"{name}\nstage {stage}")
            x += 1
        x += 1
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("GiB per rank" if gib else "bytes per rank")
    ax.set_title(f"training state per rank by ZeRO stage, {world} ranks (one bar per rank)", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    return ax
