"""The job widget's loss plot: a bqplot figure of loss by step, updated in place.

bqplot is an ipywidgets library whose JupyterLab extension comes prebuilt in its wheel, so the
plot is one more widget in the job's box. Users get axes (step, loss), a tooltip on each logged
step, and pan, zoom and reset from the figure's own toolbar (shown on mouse over). New steps
replace the marks' ``x``/``y`` arrays; the figure is never re-created, and at most one update
per ``min_interval`` seconds goes to the frontend (the last one is never dropped).
"""

from __future__ import annotations

import math
import threading
import time

WAITING = "loss: waiting for the first logged step"
TITLE = "training loss"
COLOR = "#337ab7"
FEW_STEPS = 8


class LossPlot:
    """Loss by step as a bqplot ``Figure`` (``figure``), fed by :meth:`update`."""

    def __init__(self, min_interval: float = 1.0):
        import bqplot as bq
        import ipywidgets as w

        self.min_interval = min_interval
        scales = {"x": bq.LinearScale(), "y": bq.LinearScale()}
        self.line = bq.Lines(x=[], y=[], scales=scales, colors=[COLOR], stroke_width=1.5)
        # The line's own tooltip names the whole curve; the points carry one per step.
        self.points = bq.Scatter(
            x=[],
            y=[],
            scales=scales,
            colors=[COLOR],
            default_size=16,
            tooltip=bq.Tooltip(fields=["x", "y"], labels=["step", "loss"], formats=["d", ".4g"]),
        )
        self.x_axis = bq.Axis(scale=scales["x"], label="step", tick_format="d", num_ticks=6)
        self.y_scale = scales["y"]
        self.y_axis = bq.Axis(scale=scales["y"], label="loss", side="left", tick_format=".3~g")
        axes = [self.x_axis, self.y_axis]
        self.figure = bq.Figure(
            marks=[self.line, self.points],
            axes=axes,
            title=WAITING,
            fig_margin={"top": 30, "bottom": 40, "left": 60, "right": 20},
            layout=w.Layout(width="480px", height="240px"),
        )
        self._lock = threading.Lock()
        self._shown: tuple = ((), ())
        self._latest: tuple = ((), ())
        self._sent_at = float("-inf")
        self._timer: threading.Timer | None = None

    @property
    def x(self) -> list[int]:
        """The steps the figure holds now."""
        return [int(v) for v in self.points.x]

    @property
    def y(self) -> list[float]:
        """The losses the figure holds now."""
        return [float(v) for v in self.points.y]

    def update(self, steps: list[int], losses: list[float]) -> None:
        """Show these points: now, or when ``min_interval`` has passed since the last update."""
        with self._lock:
            self._latest = (tuple(steps), tuple(losses))
            if self._latest == self._shown or self._timer is not None:
                return  # nothing new, or a flush is already due and will send the latest
            wait = self._sent_at + self.min_interval - time.monotonic()
            if wait > 0:
                self._timer = threading.Timer(wait, self.flush)
                self._timer.daemon = True
                self._timer.start()
                return
        self.flush()

    def flush(self) -> None:
        """Send the latest points now (a throttled update that is due, or a test that checks)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            steps, losses = self._latest
            if (steps, losses) == self._shown:
                return
            self._shown, self._sent_at = (steps, losses), time.monotonic()
            # One message per widget and change, not one per trait: marks, ticks and title move together.
            ticks, tick_format = loss_ticks(losses)
            with (
                self.figure.hold_sync(),
                self.x_axis.hold_sync(),
                self.y_axis.hold_sync(),
                self.y_scale.hold_sync(),
                self.line.hold_sync(),
                self.points.hold_sync(),
            ):
                self.line.x = self.points.x = list(steps)
                self.line.y = self.points.y = list(losses)
                self.figure.title = TITLE if steps else WAITING
                # A few steps get a tick each; d3's own ticks would fall between them (1, 1.5, 2).
                self.x_axis.tick_values = list(steps) if len(steps) <= FEW_STEPS else None
                # Our own loss ticks: d3's, printed to 3 digits, repeat (5.91, 5.91) on a flat curve.
                self.y_axis.tick_values = ticks or None
                self.y_axis.tick_format = tick_format
                self.y_scale.min, self.y_scale.max = (ticks[0], ticks[-1]) if ticks else (None, None)


def loss_ticks(losses, count: int = 5) -> tuple[list[float], str]:
    """Ticks for the loss axis, and their d3 format: round steps (1, 2 or 5 times a power of ten)
    that cover the losses, printed with just the decimals that keep every label distinct.
    No losses: no ticks (d3's own, ``.3~g``)."""
    if not losses:
        return [], ".3~g"
    lo, hi = min(losses), max(losses)
    if hi - lo < 1e-12:  # one value (or a flat line): a little room either side
        pad = max(abs(lo) * 0.01, 1e-3)
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / (count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    ticks = [round(i * step, decimals) for i in range(first, last + 1)]
    return ticks, f".{decimals}f"


def loss_text(steps: list[int], losses: list[float], count: int = 5) -> str:
    """The last ``count`` losses as text, for a frontend that shows no widget."""
    if not steps:
        return WAITING
    shown = [f"{s}: {v:.4g}" for s, v in zip(steps[-count:], losses[-count:], strict=False)]
    return f"loss by step (last {len(shown)} of {len(steps)}): " + ", ".join(shown)
