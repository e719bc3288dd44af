"""The CLI without pyspark, and the README's main job (examples/main_job.py)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

MAIN_JOB = pathlib.Path(__file__).resolve().parents[2] / "examples" / "main_job.py"


def _main_job():
    spec = importlib.util.spec_from_file_location("main_job", MAIN_JOB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_registers_spark_commands_without_importing_pyspark():
    code = ("import sys, pyref.cli; pyref.cli.build_parser(); "
            "assert not [m for m in sys.modules if m.startswith(('pyspark', 'pandas'))]")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_main_job_core_only(tmp_path, capsys):
    assert _main_job().main(["--no-spark", "--no-flink", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "OK: every check passed" in out
    # The format 1.2 part of the seeds: windowed counts and pending timers follow their keys.
    assert out.count("[ok] every pending timer restored exactly once, with its key") == 3


@pytest.mark.spark
def test_main_job_on_spark(spark, tmp_path, capsys):
    assert _main_job().main(["--out", str(tmp_path), "--master", "local[2]", "--no-flink"]) == 0
    out = capsys.readouterr().out
    assert "with Spark" in out and "OK: every check passed" in out
    assert spark.range(1).count() == 1  # the job left the shared session running


@pytest.mark.flink
def test_main_job_ends_in_real_flink(tmp_path, capsys):
    """The main job's last step: its seeds exported and restored by real Flink at 1 and 4 (the core
    bootstraps here; compat_tests/flink/test_flink_export.py restores Spark's)."""
    from compat_tests.flink import harness

    version = "2.3.0"
    reason = harness.flink_available(version, download=os.environ.get("PYREF_FLINK_DOWNLOAD") == "1")
    if reason:
        pytest.skip(reason)
    assert _main_job().main(["--no-spark", "--out", str(tmp_path), "--flink-version", version]) == 0
    out = capsys.readouterr().out
    assert "OK: every check passed" in out
    assert "[ok] at parallelism 4 each Flink source subtask reads one partition (none idle)" in out
    assert out.count("[ok] Flink at") == 2 and "subtask 3: offsets [201]" in out
