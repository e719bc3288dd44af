"""Progress of long Spark jobs on stderr.

A line per step, and while a step's Spark stages run, a line every few seconds:
the active stages and their finished tasks, from Spark's status tracker (classic
sessions) or the progress Spark Connect streams to its client. There is one
display of stage progress: when Spark draws its own console progress bar
(``spark.ui.showConsoleProgress``), pyref leaves stage progress to it and prints
its step lines only; the ``pyref`` CLI turns Spark's bar off and prints its own.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from .session import AnySparkSession, is_connect


def spark_shows_progress(spark: AnySparkSession) -> bool:
    """Whether Spark draws its console progress bar for ``spark``'s jobs."""
    return str(spark.conf.get("spark.ui.showConsoleProgress", "false")).lower() == "true"


class Progress:
    """Use as a context manager around a job; :meth:`step` names what runs next."""

    def __init__(self, spark: AnySparkSession, *, enabled: bool = True, interval: float = 5.0,
                 stream: TextIO | None = None) -> None:
        self.spark = spark
        self.enabled = enabled
        self.interval = interval
        self.stream = stream or sys.stderr
        self._connect = is_connect(spark)
        self._stages = enabled and not spark_shows_progress(spark)
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_line = ""
        self._last_time = 0.0

    def _print(self, message: str) -> None:
        print(f"[pyref {time.monotonic() - self._started:6.1f}s] {message}", file=self.stream, flush=True)

    def step(self, message: str) -> None:
        if not self._connect:  # the description names this step's jobs in Spark's UI
            self.spark.sparkContext.setJobDescription(message)
        if self.enabled:
            self._print(message)

    def _stage_line(self, stages) -> None:
        """Print the stages' progress if it changed and the last line is ``interval`` old."""
        line = ", ".join(f"stage {stage_id} {done}/{total} tasks{f' ({failed} failed)' if failed else ''}"
                         for stage_id, done, total, failed in stages)
        now = time.monotonic()
        if line and line != self._last_line and now - self._last_time >= self.interval:
            self._print(line)
            self._last_line, self._last_time = line, now

    def _watch(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not self._stop.wait(self.interval):
            infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            self._stage_line([(s.stageId, s.numCompletedTasks, s.numTasks, s.numFailedTasks)
                              for s in infos if s is not None])

    def _connect_progress(self, stages, inflight_tasks: int, operation_id, done: bool) -> None:
        if not done:
            self._stage_line([(s.stage_id, s.num_completed_tasks, s.num_tasks, 0)
                              for s in stages or [] if not s.done])

    def __enter__(self) -> Progress:
        if not self._stages:
            return self
        if self._connect:
            self._last_time = time.monotonic()
            # pyspark annotates the ProgressHandler ABC; its docs register a plain callable.
            self.spark.registerProgressHandler(self._connect_progress)  # type: ignore[arg-type]
        else:
            self._thread = threading.Thread(target=self._watch, name="pyref-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._connect:
            if self._stages:
                self.spark.removeProgressHandler(self._connect_progress)  # type: ignore[arg-type]
        else:
            # None unsets the description (a local property; SparkContext.setLocalProperty's docs),
            # though pyspark annotates str.
            self.spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
