"""Reading Apache Flink savepoints and retained checkpoints in pure Python, without a JVM.

``FlinkSavepoint.open(path)`` reads a savepoint's ``_metadata`` (every format
version Flink 1.6-2.x writes) and gives views of each operator's list, union
and broadcast state, keyed state and timers, decoded from the canonical
savepoint format both the HashMap and RocksDB backends write (snappy
compression included), from a HashMap backend checkpoint's own layout, or from
RocksDB's own SST files (RocksDB checkpoints since Flink 1.16, full or incremental,
and native-format savepoints: :mod:`.rocksdb`). Changelog state is refused with
:class:`~pyref.errors.UnsupportedFormatError`.

``import_flink(src, dst)`` imports one as a pyref savepoint: :mod:`.import_plan`
(what will be written), :mod:`.from_flink` (Flink types as pyref serializers,
Flink's bytes as pyref's encodings, over :mod:`.spans`), :mod:`.importer` (the
writing); :mod:`.inspection` is ``pyref inspect`` / ``verify`` on a Flink
savepoint and :mod:`.import_cli` the ``import-flink`` command.

Modules, one concept each: :mod:`.datainput` (Java ``DataInput``),
:mod:`.metadata` (``_metadata``), :mod:`.handles` (state handles and where
their bytes are), :mod:`.compression` (snappy framing), :mod:`.serializers`
(serializer snapshots), :mod:`.meta_info` (state meta info), :mod:`.keyed`
(keyed streams), :mod:`.heap` (a heap checkpoint's keyed streams), :mod:`.rocksdb` (SST files and their merge), :mod:`.composite` (composite keys, list and map values),
:mod:`.operator_state` (operator streams), :mod:`.values` (value decoders),
:mod:`.columns` (Arrow columns), :mod:`.state_views`, :mod:`.savepoint` and
:mod:`.restore` (the public views); :mod:`.sources` (a FLIP-27 source's splits and
enumerator checkpoint, decoded, encoded and rewritten; ``pyref set-source-position`` in
:mod:`.source_cli`).

The other direction, pyref -> Flink: :func:`export_savepoint` writes a canonical
Flink savepoint (:mod:`.writer`, with :mod:`.to_flink` mapping serializers,
:mod:`.transcode` and :mod:`.rows` turning pyref's encodings into Flink's, and
:mod:`.dataoutput` writing Java's ``DataOutput``).
"""

from .handles import DistributionMode
from .importer import ImportReport, import_flink
from .savepoint import FlinkOperator, FlinkSavepoint, operator_id_of_uid
from .serializers import FlinkType
from .values import GLOBAL_WINDOW, Row, TimeWindow, Timer, TtlValue
from .writer import ExportResult, export_savepoint

__all__ = [
    "GLOBAL_WINDOW",
    "DistributionMode",
    "ExportResult",
    "FlinkOperator",
    "FlinkSavepoint",
    "FlinkType",
    "ImportReport",
    "Row",
    "TimeWindow",
    "Timer",
    "TtlValue",
    "export_savepoint",
    "import_flink",
    "operator_id_of_uid",
]
