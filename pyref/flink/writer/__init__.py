"""Writing canonical Flink savepoints from pyref savepoints (the export).

Modules, one concept each: :mod:`.meta_info` (state meta info), :mod:`.keyed`
(keyed streams: keyed state and timers), :mod:`.operator_state` (operator-state
streams: list, union and broadcast state), :mod:`.metadata` (``_metadata`` and its
handles), :mod:`.directory` (state files and the atomic commit) and :mod:`.export`
(planning, checks and :func:`export_savepoint`). Serializers and values are mapped
by :mod:`pyref.flink.to_flink` and :mod:`pyref.flink.transcode`.
"""

from .export import ExportPlan, ExportResult, HandleTask, HandleWriter, export_savepoint, plan_export

__all__ = ["ExportPlan", "ExportResult", "HandleTask", "HandleWriter", "export_savepoint", "plan_export"]
