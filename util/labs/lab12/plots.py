"""Lab 12's figure: memory over a training step's schedule, with and without checkpointing."""
from __future__ import annotations

from typing import Mapping

from util.labs.lab12.executor import Run


def plot_memory(runs: Mapping[str, Run], budget: int | None = None, ax=None, title: str = ""):
    """One line per run (:func:`util.labs.lab12.executor.run_plan`): the bytes alive at each step, in KiB,
    the peak marked; ``budget`` as a dashed line. Runs of different plans have different numbers of
    steps (recompute steps are extra): each is drawn against its own step numbers, with the start of
    its backward pass (the ``loss`` step) marked. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(11, 4))
    for (label, run), color in zip(runs.items(), ("#555555", "#1f77b4", "#d62728", "#2ca02c", "#9467bd")):
        kib = [value / 1024 for value in run.memory]
        ax.step(range(len(kib)), kib, where="mid", color=color,
                label=f"{label}: peak {run.peak_bytes / 1024:,.0f} KiB, recompute {run.recompute_macs / 1e6:,.1f} M MACs")
        peak = run.memory.index(run.peak_bytes)
        ax.plot([peak], [kib[peak]], "o", color=color)
        ax.axvline(run.steps.index("loss"), color=color, alpha=0.25, linewidth=1)
    if budget is not None:
        ax.axhline(budget / 1024, color="black", linestyle="--", linewidth=1, label=f"budget {budget / 1024:,.0f} KiB")
    ax.set_xlabel("step of the schedule (forward, loss, then recompute and backward; faint lines: the loss step)")
    ax.set_ylabel("activations and gradients alive (KiB)")
    ax.set_ylim(0, 1.5 * max(max(run.memory) for run in runs.values()) / 1024)
    if title:
        ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    return ax
