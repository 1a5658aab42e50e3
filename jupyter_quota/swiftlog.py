"""What a ``swift sft`` log says about its training run: steps, losses, time left, checkpoints.

Pure and free of I/O. ms-swift 4.x prints, on its (merged) stdout and stderr:

- a tqdm bar ``Train:  33%|███▎      | 1/3 [00:01<00:02, 1.2it/s]``, redrawn with carriage
  returns, so one "line" of a log file may hold many bars and even an ``[INFO:swift]`` message;
- every ``logging_steps`` a Python dict such as ``{'loss': '6.015', 'grad_norm': '1.273',
  'learning_rate': '7.5e-05', 'epoch': '0.03125', 'global_step/max_steps': '1/3',
  'elapsed_time': '0s', 'remaining_time': '0s', 'train_speed(s/it)': '0.02843'}`` (values are
  strings in 4.6, numbers in earlier releases), eval dicts with ``eval_loss``, and at the end a
  summary dict with ``train_runtime`` and ``train_loss``;
- ``[INFO:swift] output_dir: ...``, ``Saving model checkpoint to ...`` and
  ``last_model_checkpoint: ...``.

``TrainProgress.feed(text)`` reads any slice of such a log (a tail that overlaps the previous
one is fine: records are keyed by step), and ``parse_log(text)`` reads a whole one.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

__all__ = ["TrainProgress", "parse_duration", "parse_log", "parse_log_dict"]

_SEGMENT_SPLIT = re.compile(r"[\r\n]+")
_DICT = re.compile(r"\{'[^{}]*\}")
_TQDM_TRAIN = re.compile(
    r"Train:\s*(?P<pct>\d+)%\|[^|]*\|\s*(?P<step>\d+)/(?P<total>\d+)\s*"
    r"\[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:?]+)"
)
_OUTPUT_DIR = re.compile(r"\[INFO:swift\] output_dir: (?P<path>\S+)")
_SAVING = re.compile(r"Saving model checkpoint to (?P<path>\S+)")
_LAST_CKPT = re.compile(r"last_model_checkpoint: (?P<path>\S+)")
_BEST_CKPT = re.compile(r"best_model_checkpoint: (?P<path>\S+)")
_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt)\b(?::.*)?$")
# torch >= 2.1 raises torch.OutOfMemoryError ("CUDA out of memory. Tried to allocate ..."); older
# releases a RuntimeError with the same words; DeepSpeed's own allocator says "out of memory" too.
_OUT_OF_MEMORY = re.compile(r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms])")
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}


@dataclass
class TrainProgress:
    """A training run as far as its log tells: feed it log text, read the fields."""

    #: the latest optimizer step seen (from a log dict or the tqdm bar) and the planned total
    step: int | None = None
    max_steps: int | None = None
    #: training log records (numbers as floats where they parse) by global step
    records: dict[int, dict] = field(default_factory=dict)
    #: eval records (those with ``eval_loss``) by global step
    evals: dict[int, dict] = field(default_factory=dict)
    #: seconds, as the newest source (tqdm bar or log dict) reports them
    elapsed: float | None = None
    remaining: float | None = None
    output_dir: str | None = None
    checkpoints: list[str] = field(default_factory=list)
    last_checkpoint: str | None = None
    best_checkpoint: str | None = None
    #: the final summary dict (``train_runtime``, ``train_loss``...) once training ended
    summary: dict | None = None
    #: the last exception line after a traceback (``ValueError: ...``), if any
    error: str | None = None
    #: whether the run died of CUDA out-of-memory (the log says so anywhere)
    out_of_memory: bool = False
    _in_traceback: bool = field(default=False, repr=False)

    # -- reading -----------------------------------------------------------------------------
    def feed(self, text: str) -> TrainProgress:
        """Take in a slice of the log (any overlap with earlier slices is harmless)."""
        for segment in _SEGMENT_SPLIT.split(text or ""):
            if segment.strip():
                self._segment(segment)
        return self

    @property
    def steps(self) -> list[int]:
        """Steps that logged a training loss, in order."""
        return [s for s in sorted(self.records) if "loss" in self.records[s]]

    @property
    def losses(self) -> list[float]:
        """The training loss at each of :attr:`steps`."""
        return [self.records[s]["loss"] for s in self.steps]

    @property
    def loss(self) -> float | None:
        """The latest training loss."""
        losses = self.losses
        return losses[-1] if losses else None

    @property
    def peak_memory_gib(self) -> float | None:
        """The highest ``memory(GiB)`` the run logged: ms-swift's ``max_memory_reserved`` of the
        busiest GPU so far (swift/trainers/patcher.py), what the estimate predicts."""
        peaks = [
            r["memory(GiB)"]
            for r in (*self.records.values(), *self.evals.values())
            if isinstance(r.get("memory(GiB)"), float)
        ]
        return max(peaks) if peaks else None

    @property
    def fraction(self) -> float | None:
        """Share of the planned steps done (0 to 1), when the total is known."""
        if self.step is None or not self.max_steps:
            return None
        return min(1.0, self.step / self.max_steps)

    @property
    def finished(self) -> bool:
        return self.summary is not None or self.last_checkpoint is not None

    def to_json(self) -> dict:
        return {
            "step": self.step,
            "max_steps": self.max_steps,
            "steps": self.steps,
            "losses": self.losses,
            "elapsed": self.elapsed,
            "remaining": self.remaining,
            "output_dir": self.output_dir,
            "last_checkpoint": self.last_checkpoint,
            "finished": self.finished,
            "error": self.error,
            "peak_memory_gib": self.peak_memory_gib,
            "out_of_memory": self.out_of_memory,
        }

    # -- one carriage-return or newline separated piece ---------------------------------------
    def _segment(self, segment: str) -> None:
        stripped = segment.strip()
        if _OUT_OF_MEMORY.search(stripped):
            self.out_of_memory = True
        if stripped.startswith("Traceback (most recent call last)"):
            self._in_traceback = True
            return
        if self._in_traceback and _ERROR.match(stripped):
            self.error = stripped
            self._in_traceback = False
        for match in _TQDM_TRAIN.finditer(segment):
            self._tqdm(match)
        for match in _DICT.finditer(segment):
            record = parse_log_dict(match.group(0))
            if record is not None:
                self._record(record)
        for pattern, attr in (
            (_OUTPUT_DIR, "output_dir"),
            (_LAST_CKPT, "last_checkpoint"),
            (_BEST_CKPT, "best_checkpoint"),
        ):
            found = pattern.search(segment)
            if found and found.group("path") != "None":
                setattr(self, attr, found.group("path"))
        saving = _SAVING.search(segment)
        if saving and saving.group("path") not in self.checkpoints:
            self.checkpoints.append(saving.group("path"))

    def _tqdm(self, match: re.Match) -> None:
        step, total = int(match.group("step")), int(match.group("total"))
        self.max_steps = total
        if self.step is None or step >= self.step:
            self.step = step
            self.elapsed = _clock(match.group("elapsed"))
            self.remaining = _clock(match.group("remaining"))

    def _record(self, record: dict) -> None:
        progress = record.get("global_step/max_steps")
        if not isinstance(progress, str) or "/" not in progress:
            return
        try:
            step, total = (int(x) for x in progress.split("/", 1))
        except ValueError:
            return
        self.max_steps = total
        if "train_runtime" in record:
            self.summary = record
        elif any(k.startswith("eval_") for k in record):
            self.evals[step] = record
        else:
            self.records[step] = record
        if self.step is None or step >= self.step:
            self.step = step
            self.elapsed = parse_duration(record.get("elapsed_time"))
            self.remaining = parse_duration(record.get("remaining_time"))


def parse_log(text: str) -> TrainProgress:
    """Everything a whole ``swift sft`` log says (see :class:`TrainProgress`)."""
    return TrainProgress().feed(text)


def parse_log_dict(text: str) -> dict | None:
    """One printed log dict, with values that read as numbers made floats; None if not one."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    out = {}
    for key, item in value.items():
        if isinstance(item, str) and key not in (
            "global_step/max_steps",
            "elapsed_time",
            "remaining_time",
            "percentage",
        ):
            try:
                item = float(item)
            except ValueError:
                pass
        elif isinstance(item, int) and not isinstance(item, bool):
            item = float(item)
        out[str(key)] = item
    return out


def parse_duration(text) -> float | None:
    """``'1h 2m 3s'`` (ms-swift's ``format_time``) or ``'0s'`` in seconds; None if unreadable."""
    if not isinstance(text, str):
        return None
    parts = _DURATION.findall(text)
    if not parts:
        return None
    return float(sum(float(n) * _UNIT[u] for n, u in parts))


def _clock(text: str) -> float | None:
    """tqdm's ``MM:SS`` or ``H:MM:SS`` in seconds (``?`` when unknown: None)."""
    if "?" in text:
        return None
    seconds = 0.0
    for part in text.split(":"):
        if not part.isdigit():
            return None
        seconds = seconds * 60 + int(part)
    return seconds
