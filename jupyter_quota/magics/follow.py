"""Following a job from the notebook: the ``Job`` handle and its live widget.

``Job`` is what ``%swift_sft`` returns: ``job.status`` (the phase, asked of the server),
``job.logs()``, ``job.cancel()``, ``job.wait()``, ``job.retry()`` (after CUDA out-of-memory: the
next plan down), and what the log said so far
(``job.progress``: steps, losses, checkpoints, from :mod:`jupyter_quota.swiftlog`).

``JobWidget`` shows it: phase, a progress bar of ``global_step/max_steps``, elapsed time and
ETA, a loss plot (:mod:`.lossplot`, bqplot), the log tail, and a Cancel button. Where no widget
can show, the job is text: its phase, step and last losses (``str(job)``).

Following (``job.follow()``, daemon threads; widget updates from a thread are sent by the kernel's
IOPub thread, as tqdm's notebook bar does) is pushed, not polled (issue 23): one thread holds
``GET quota/v1/events`` open (the same client, so embedded and hub-forwarded alike) and takes the
job's ``job`` events (phase, reason, history) as they come; the job route is read once as the
stream opens and then only every :data:`RESYNC_SECONDS`. The log, which gives the steps, losses
and checkpoint, is read every ``interval`` while the job is Running and once more at its end: no
event carries it (the service reads no training logs for its subscribers, and a job's log is
only wanted by the one widget that shows it), and nothing is read while it is Pending. Where the
stream cannot be opened (refused, or a server without it) or drops, the job and its log are
polled every ``interval`` as before, and a dropped stream is opened again after
:data:`RECONNECT_SECONDS`.
"""

from __future__ import annotations

import calendar
import html
import threading
import time

from ..reasons import CANCELLED, OUT_OF_MEMORY
from ..swiftlog import TrainProgress
from .client import QuotaClientError, ServerNotFound
from .lossplot import LossPlot, loss_text

TERMINAL_PHASES = ("Succeeded", "Failed")
#: the ``event:`` of a job's change on ``GET /events`` (``service/events.py``'s ``JOB``)
JOB_EVENT = "job"
LOG_TAIL_LINES = 2000  # read per refresh: enough to not miss a step between two refreshes
SHOWN_LOG_LINES = 15
#: while the job's changes are pushed, the job is still read this often: a change the service took
#: into its first pass's baseline, as a stream opened, is never sent (seconds)
RESYNC_SECONDS = 30.0
#: what a dropped stream waits before it is opened again (the service's ``retry:``, 5 s)
RECONNECT_SECONDS = 5.0


class Job:
    """A quota job in a namespace, as its server reports it."""

    def __init__(self, client, namespace: str, name: str, info: dict | None = None, interval: float = 2.0):
        self.client = client
        self.namespace = namespace
        self.name = name
        self.info: dict = dict(info or {})
        self.interval = interval
        self.progress = TrainProgress()
        self.log_tail = ""
        self.error: str | None = None  # the last error talking to the server
        self._lock = threading.RLock()
        self._listeners: list = []
        self._thread: threading.Thread | None = None
        self._widget: JobWidget | None = None
        #: whether the job's changes arrive on ``GET /events`` now (else they are polled)
        self.pushed = False
        self._stream = None
        self._stream_decided = threading.Event()  # the stream opened, or will not
        self._wake = threading.Event()  # the follower: a change came, look now
        self._ended = threading.Event()
        self._synced = 0.0  # when the job was last read from its route (monotonic)

    # -- the public handle ----------------------------------------------------------------------
    @property
    def status(self) -> str:
        """The job's phase now (Pending, Running, Succeeded, Failed), asked of the server."""
        self._refresh_info()
        return self.phase

    @property
    def phase(self) -> str:
        """The phase at the last refresh (no server call)."""
        return self.info.get("phase", "Pending")

    @property
    def done(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def steps(self) -> list[int]:
        return self.progress.steps

    @property
    def losses(self) -> list[float]:
        return self.progress.losses

    @property
    def checkpoint(self) -> str | None:
        """The last checkpoint ms-swift logged (``last_model_checkpoint``), once it did."""
        return self.progress.last_checkpoint or (self.progress.checkpoints[-1] if self.progress.checkpoints else None)

    def logs(self, tail_lines: int | None = None) -> str:
        """The job's log (its last ``tail_lines`` lines; the server's default when None)."""
        return self.client.logs(self.namespace, self.name, tail_lines)

    def cancel(self) -> str:
        """Cancel the job (SIGTERM, then SIGKILL after the grace period); return the phase."""
        with self._lock:
            self.info = self.client.cancel(self.namespace, self.name)
        self._notify()
        return self.phase

    @property
    def out_of_memory(self) -> bool:
        """Whether the job died of CUDA out-of-memory (the server read it in its log)."""
        return self.info.get("reason") == OUT_OF_MEMORY

    def retry(self) -> Job:
        """After the job ran out of GPU memory: submit the next plan down (the plan search with
        this configuration known not to fit) and return the new job, followed."""
        result = self.client.replan(self.namespace, self.name)
        best = result.get("recommended")
        if best is None:
            raise QuotaClientError(
                f"no smaller plan fits {self.namespace} now (see client.replan({self.namespace!r}, "
                f"{self.name!r})['rejected']); free quota or lower --max_length"
            )
        body: dict = {"args": list(best["args"]), "gpus": best["gpus"]}
        if best.get("resources"):
            body["resources"] = best["resources"]
        info = self.client.submit(self.namespace, body)
        job = Job(self.client, self.namespace, info["name"], info, interval=self.interval)
        return job.follow()

    def wait(self, timeout: float | None = None, interval: float | None = None) -> str:
        """Block until the job ends; return its final phase. ``TimeoutError`` after ``timeout`` s.
        The job is followed meanwhile (pushed, else polled every ``interval`` s)."""
        self.follow(interval)
        if not self._ended.wait(timeout):
            raise TimeoutError(f"job {self.namespace}/{self.name} is still {self.phase} after {timeout:g}s")
        return self.phase

    def refresh(self) -> Job:
        """Read the job and its log tail from the server, update the progress and the widget."""
        with self._lock:
            try:
                self.info = self.client.job(self.namespace, self.name)
                self._synced = time.monotonic()
                self.log_tail = self.client.logs(self.namespace, self.name, LOG_TAIL_LINES) or ""
                self.progress.feed(self.log_tail)
                self.error = None
            except Exception as e:  # noqa: BLE001 - shown in the widget; the poller keeps going
                self.error = getattr(e, "message", None) or str(e)
        self._notify()
        return self

    def _refresh_logs(self) -> None:
        with self._lock:
            try:
                self.log_tail = self.client.logs(self.namespace, self.name, LOG_TAIL_LINES) or ""
                self.progress.feed(self.log_tail)
                self.error = None
            except Exception as e:  # noqa: BLE001 - shown in the widget; the follower keeps going
                self.error = getattr(e, "message", None) or str(e)
        self._notify()

    # -- following ------------------------------------------------------------------------------
    def follow(self, interval: float | None = None) -> Job:
        """Follow the job in daemon threads until it ends (idempotent): its changes pushed, else
        polled every ``interval`` s (the job's own by default)."""
        if self._thread is None or not self._thread.is_alive():
            if self.done:
                self._ended.set()
                return self
            if interval is not None:
                self.interval = interval
            self._thread = threading.Thread(target=self._follow, name=f"jupyter-quota-follow-{self.name}", daemon=True)
            self._thread.start()
        return self

    @property
    def widget(self) -> JobWidget:
        if self._widget is None:
            self._widget = JobWidget(self)
        return self._widget

    def elapsed(self, now: float | None = None) -> float | None:
        """Seconds the job has been running (to its end, once it ended)."""
        start = _epoch(self.info.get("startedAt") or self.info.get("createdAt"))
        if start is None:
            return None
        end = _epoch(self.info.get("finishedAt")) if self.done else None
        return max(0.0, (end if end is not None else (now or time.time())) - start)

    def eta(self) -> float | None:
        """Seconds left: ms-swift's own estimate, else extrapolated from the steps done."""
        if self.done:
            return 0.0
        if self.progress.remaining is not None and self.progress.step:
            return self.progress.remaining
        fraction, elapsed = self.progress.fraction, self.elapsed()
        if fraction and elapsed:
            return elapsed * (1 - fraction) / fraction
        return None

    def _follow(self) -> None:
        self._stream_decided.clear()
        listener = threading.Thread(target=self._listen, name=f"jupyter-quota-events-{self.name}", daemon=True)
        listener.start()
        self._stream_decided.wait(max(self.interval, 5.0))  # no poll while the stream is opening
        try:
            while not self.done:
                if not self.pushed:
                    self.refresh()
                elif time.monotonic() - self._synced >= RESYNC_SECONDS:
                    self._refresh_quietly()
                if self.pushed and self.phase == "Running":
                    self._refresh_logs()
                if self.done:
                    break
                self._wake.wait(self.interval)
                self._wake.clear()
            self._refresh_logs()  # the last steps, losses and checkpoint
        finally:
            stream, self._stream = self._stream, None
            if stream is not None:
                stream.close()
            self._ended.set()

    def _listen(self) -> None:
        """Hold ``GET /events`` open and take this job's events, until the job ends; opened again
        after a drop, given up (polling) when refused."""
        while not self.done:
            try:
                stream = self.client.events()
            except ServerNotFound:  # unreachable now: poll, and try again
                self._stream_decided.set()
                if self._ended.wait(RECONNECT_SECONDS):
                    return
                continue
            except Exception:  # noqa: BLE001 - refused (or a client without it): polled from now on
                self._stream_decided.set()
                return
            self._stream = stream
            try:
                self._refresh_info()  # the job as the stream starts; what changes after arrives on it
                self.pushed = True
                self._stream_decided.set()
                for event, data in stream:
                    if event == JOB_EVENT and data.get("namespace") == self.namespace and data.get("name") == self.name:
                        self._take(data)
                    if self.done:
                        break
            except Exception:  # noqa: BLE001 - the job could not be read: polled meanwhile
                pass
            finally:
                self.pushed = False
                self._stream_decided.set()
                stream.close()
                self._wake.set()  # the follower polls until the stream is back
            if self._ended.wait(RECONNECT_SECONDS):
                return

    def _take(self, job: dict) -> None:
        """A pushed ``job`` event of this job: its new state (an ended job never goes back)."""
        with self._lock:
            if self.done and job.get("phase") not in TERMINAL_PHASES:
                return
            self.info = job
        self._notify()
        self._wake.set()  # a job that started or ended: its log now

    def _refresh_quietly(self) -> None:
        try:
            self._refresh_info()
        except Exception as e:  # noqa: BLE001 - shown in the widget; the follower keeps going
            self.error = getattr(e, "message", None) or str(e)
            self._notify()

    def _refresh_info(self) -> None:
        with self._lock:
            self.info = self.client.job(self.namespace, self.name)
            self._synced = time.monotonic()
        self._notify()

    def _notify(self) -> None:
        if self.done:
            self._wake.set()
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:  # noqa: BLE001 - a broken view must not stop the job handle
                pass

    def _ipython_display_(self):
        from .display import in_kernel, publish

        # In a kernel: the widget, with the text for a frontend that shows no widgets.
        publish({"text/plain": self.summary()}, self.widget.box if in_kernel() else None)

    def summary(self) -> str:
        p = self.progress
        parts = [f"job {self.namespace}/{self.name}: {self.phase}"]
        if p.step is not None:
            parts.append(f"step {p.step}/{p.max_steps or '?'}")
        if p.loss is not None:
            parts.append(f"loss {p.loss:g}")
        if self.info.get("message"):
            parts.append(str(self.info["message"]))
        parts += elastic_lines(self.info)
        return ", ".join(parts) + (f"\n{loss_text(p.steps, p.losses)}" if p.steps else "")

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"<Job {self.namespace}/{self.name} {self.phase}: job.status, job.logs(), job.wait(), job.cancel()>"


class JobWidget:
    """The live view of a :class:`Job` (ipywidgets); ``box`` is what gets displayed."""

    def __init__(self, job: Job):
        import ipywidgets as w

        self.job = job
        self.header = w.HTML()
        self.progress = w.IntProgress(value=0, min=0, max=1, bar_style="info", layout=w.Layout(width="24em"))
        self.stats = w.HTML()
        self.loss_plot = LossPlot()
        self.log = w.HTML()
        self.cancel_button = w.Button(
            description="Cancel", button_style="danger", icon="stop", tooltip="Cancel this job (SIGTERM, then SIGKILL)"
        )
        self.cancel_button.on_click(self._on_cancel)
        self.retry_button = w.Button(
            description="Retry with the next plan down",
            button_style="warning",
            icon="redo",
            tooltip="The job ran out of GPU memory: submit the best plan that remains (job.retry())",
            layout=w.Layout(width="auto", display="none"),
        )
        self.retry_button.on_click(self._on_retry)
        self.retried = w.VBox()  # the retried job's own widget, once there is one
        self.retried_job: Job | None = None
        self.box = w.VBox(
            [
                self.header,
                w.HBox([self.progress, self.stats]),
                self.loss_plot.figure,
                w.HBox([self.cancel_button, self.retry_button]),
                self.log,
                self.retried,
            ]
        )
        job._listeners.append(lambda _job: self.update())
        self.update()

    def update(self) -> None:
        job, p = self.job, self.job.progress
        reason = job.info.get("reason")
        phase = phase_label(job.phase, reason)
        color = {"Succeeded": "#5cb85c", "Failed": "#d9534f", "Running": "#337ab7"}.get(phase, "#777")
        message = job.info.get("message") or (p.error if phase == "Failed" else None)
        detail = f" &middot; {_e(reason)}" if reason else ""
        detail += f"<br><small>{_e(message)}</small>" if message else ""
        if job.error:
            detail += f"<br><small style='color:#d9534f'>{_e(job.error)}</small>"
        elastic = elastic_lines(job.info)
        if elastic:
            detail += "<br><small>" + " &middot; ".join(_e(line) for line in elastic) + "</small>"
        self.header.value = (
            f"<b>{_e(job.namespace)}/{_e(job.name)}</b> "
            f"<span style='color:{color};font-weight:bold'>{_e(phase)}</span>{detail}"
        )
        if p.max_steps:
            self.progress.max = p.max_steps
            self.progress.value = min(p.step or 0, p.max_steps)
        if phase == "Succeeded":
            self.progress.bar_style = "success"
            if not p.max_steps:
                self.progress.value = self.progress.max
        elif phase == "Failed":
            self.progress.bar_style = "danger"
        elif phase == "Cancelled":
            self.progress.bar_style = ""
        stats = [f"step {p.step if p.step is not None else 0}/{p.max_steps or '?'}"]
        if p.loss is not None:
            stats.append(f"loss {p.loss:.4g}")
        stats.append(f"elapsed {_clock(job.elapsed())}")
        if not job.done:
            stats.append(f"ETA {_clock(job.eta())}")
        if job.checkpoint:
            stats.append(f"checkpoint <code>{_e(job.checkpoint)}</code>")
        memory = job.info.get("memory")
        if memory and job.info.get("gpus") != 0:  # no per-GPU figure for a CPU-only job
            stats.append(_e(memory_text(memory)))
        self.stats.value = "&nbsp;" + " &middot; ".join(stats)
        self.loss_plot.update(p.steps, p.losses)
        if job.done:
            self.loss_plot.flush()  # the final picture at once, not a throttle's delay later
        self.log.value = (
            "<pre style='max-height:16em;overflow:auto;font-size:85%;margin:0'>"
            f"{_e(screen_lines(job.log_tail, SHOWN_LOG_LINES))}</pre>"
        )
        # An ended job has nothing to cancel: the button goes, not just greys out.
        self.cancel_button.layout.display = "none" if job.done else ""
        self.cancel_button.disabled = job.done
        self.retry_button.layout.display = "" if job.out_of_memory and not self.retried.children else "none"

    def _on_retry(self, _button) -> None:
        self.retry_button.disabled = True
        try:
            retried = self.job.retry()
        except Exception as e:  # noqa: BLE001 - shown in the widget, never a traceback
            self.job.error = f"retry failed: {getattr(e, 'message', None) or e}"
            self.retry_button.disabled = False
        else:
            self.retried_job = retried
            self.retried.children = (retried.widget.box,)
        self.update()

    def _on_cancel(self, _button) -> None:
        self.cancel_button.disabled = True
        try:
            self.job.cancel()
        except Exception as e:  # noqa: BLE001 - shown in the widget, never a traceback
            self.job.error = f"cancel failed: {getattr(e, 'message', None) or e}"
            self.cancel_button.disabled = False
            self.update()


def elastic_lines(info: dict) -> list[str]:
    """The job's priority and what elastic quota did to it, as the sidebar says it (``src/jobs.ts``):
    running on borrowed GPUs, preempted at step N, requeued, resumed."""
    lines = []
    level = info.get("priority")
    if level and level != "normal":
        lines.append(f"{level} priority")
    if info.get("phase") == "Running" and info.get("borrowed"):
        lines.append("running on borrowed GPUs")
    for event in info.get("history") or []:
        kind, checkpoint = event.get("event"), event.get("checkpoint")
        if kind == "Borrowed":
            lines.append("started on borrowed GPUs")
        elif kind == "Preempted":
            step = event.get("step")
            lines.append(f"preempted{f' at step {step}' if step is not None else ''} ({event.get('reason')})")
        elif kind == "Requeued":
            lines.append(f"requeued, to resume from {checkpoint}" if checkpoint else "requeued, to start again")
        elif kind == "Resumed":
            lines.append(f"resumed from {checkpoint}")
    return lines


def screen_lines(text: str, count: int) -> str:
    """The last ``count`` lines as a terminal would show them (each line's last ``\\r`` redraw)."""
    lines = []
    for line in (text or "").split("\n"):
        shown = [seg for seg in line.split("\r") if seg.strip()]
        lines.append(shown[-1] if shown else line.strip("\r"))
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines[-count:])


def _epoch(stamp) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(stamp.replace("Z", "")[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def phase_label(phase: str, reason: str | None) -> str:
    """The phase as the views show it: a Failed job its user cancelled says ``Cancelled``
    (neutral, as the sidebar's ``phaseLabel`` in ``src/jobs.ts``)."""
    return "Cancelled" if phase == "Failed" and reason == CANCELLED else phase


def memory_text(memory: dict) -> str:
    """A job's ``memory`` field in words: ``estimated 14.2 GiB (12.9-16.1) per GPU, measured 15.0 GiB``."""
    text = f"estimated {memory['estimatedGib']} GiB"
    if memory.get("rangeGib"):
        text += f" ({memory['rangeGib'][0]}-{memory['rangeGib'][1]})"
    text += " per GPU"
    if memory.get("measuredGib") is not None:
        text += f", measured {memory['measuredGib']} GiB"
    return text + (", out of memory" if memory.get("outOfMemory") else "")
