"""Progress of long Spark jobs on stderr.

A line per step, and while a step's Spark stages run, a line every few seconds
from Spark's status tracker: the active stages and their finished tasks.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from pyspark.sql import SparkSession


class Progress:
    """Use as a context manager around a job; :meth:`step` names what runs next."""

    def __init__(self, spark: SparkSession, *, enabled: bool = True, interval: float = 5.0,
                 stream: TextIO | None = None) -> None:
        self.spark = spark
        self.enabled = enabled
        self.interval = interval
        self.stream = stream or sys.stderr
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _print(self, message: str) -> None:
        print(f"[pyref {time.monotonic() - self._started:6.1f}s] {message}", file=self.stream, flush=True)

    def step(self, message: str) -> None:
        # The description also names the Spark jobs of this step in Spark's UI.
        self.spark.sparkContext.setJobDescription(message)
        if self.enabled:
            self._print(message)

    def _watch(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        last = ""
        while not self._stop.wait(self.interval):
            stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            line = ", ".join(f"stage {s.stageId} {s.numCompletedTasks}/{s.numTasks} tasks"
                             f"{f' ({s.numFailedTasks} failed)' if s.numFailedTasks else ''}"
                             for s in stages if s is not None)
            if line and line != last:
                self._print(line)
                last = line

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._watch, name="pyref-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]  # None clears it
