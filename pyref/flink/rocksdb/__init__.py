"""RocksDB's own files in Flink snapshots (native format): :mod:`.sst` reads one block-based
table file, :mod:`.native` merges the files of one keyed state handle into live rows."""
