"""Real Flink savepoints: fetch Flink releases from PyPI, run small jobs on Flink's local
mini cluster, take canonical savepoints with their ground truth (the corpus under
``corpus/``), and restore savepoints in real Flink to dump what Flink reads."""
