"""The soak's timeline as a PNG (matplotlib, Agg: no display needed): Ready pods per
service, the big web services and the small ones on panels of their own, and the
nodes draining, with each batch shaded."""

from __future__ import annotations

from pathlib import Path

from soak.run import Outcome

SMALL = 40  # services of at most this many pods go on the second panel


def series(
    samples: list[tuple[float, str, int]], end: float
) -> dict[str, tuple[list[float], list[int]]]:
    """Per service, the step curve of its Ready pods, held to `end`."""
    curves: dict[str, tuple[list[float], list[int]]] = {}
    for at, service, count in sorted(samples, key=lambda s: s[0]):
        xs, ys = curves.setdefault(service, ([], []))
        xs.append(max(0.0, at))
        ys.append(count)
    for xs, ys in curves.values():
        xs.append(end)
        ys.append(ys[-1])
    return curves


def draining(outcome: Outcome) -> tuple[list[float], list[int]]:
    changes = sorted(
        [(d.started, 1) for d in outcome.drains] + [(d.ended, -1) for d in outcome.drains]
    )
    xs, ys, level = [0.0], [0], 0
    for at, step in changes:
        level += step
        xs.append(at)
        ys.append(level)
    xs.append(outcome.seconds)
    ys.append(level)
    return xs, ys


def draw(outcome: Outcome, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    config = outcome.config
    curves = series(outcome.samples, outcome.seconds)
    big = {s: c for s, c in curves.items() if max(c[1]) > SMALL}
    small = {s: c for s, c in curves.items() if max(c[1]) <= SMALL}
    groups = [g for g in (big, small) if g]
    figure, axes = plt.subplots(
        len(groups) + 1,
        1,
        sharex=True,
        figsize=(12, 8),
        gridspec_kw={"height_ratios": [3, 2, 1][-len(groups) - 1 :]},
    )
    for axis, group in zip(axes[:-1], groups, strict=True):
        for i, (service, (xs, ys)) in enumerate(sorted(group.items())):
            # Dashes tell apart services with the same counts (two DaemonSets).
            style = ("-", "--", "-.", ":")[i % 4]
            axis.step(
                xs,
                ys,
                where="post",
                label=service.split("/", 1)[1],
                linewidth=1.2,
                linestyle=style,
            )
        axis.set_ylabel("Ready pods")
        axis.set_ylim(bottom=0)
        axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        axis.grid(alpha=0.3)
    xs, ys = draining(outcome)
    axes[-1].step(xs, ys, where="post", color="black", linewidth=1.2)
    axes[-1].set_ylabel("nodes draining")
    axes[-1].set_ylim(0, max([*ys, 1]) + 0.5)
    axes[-1].grid(alpha=0.3)
    for batch in outcome.batches:
        for axis in axes:
            axis.axvspan(
                batch.started,
                batch.settled,
                color="tab:blue" if batch.index % 2 else "tab:orange",
                alpha=0.08,
                linewidth=0,
            )
    axes[-1].set_xlabel(
        f"seconds since the refresh began (wall clock; pod start and stop times divided by "
        f"{config.speed:g})"
    )
    limit = sum(b.limit for b in outcome.batches)
    axes[0].set_title(
        f"Instance refresh on {config.backend}: {config.nodes} nodes, {config.batch} at a time, "
        f"{outcome.pods_at_start} pods; {outcome.seconds:.0f} s against a pacing limit of "
        f"{limit:.0f} s",
        fontsize=10,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
