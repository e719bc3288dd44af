"""Rows of a bootstrap that repeat an identity (a key, its namespace, its user key for MAP
state): refused, or resolved before writing as the caller says.

The format keeps the last of such rows in state order (spec/format.md §7.1), but which row
comes last after a Spark shuffle is chance, so :meth:`SavepointBuilder.add_keyed_state`
never stores them as they come:

- ``"error"`` (default): every write task sorts its rows by key group and identity and
  refuses the first identity it sees twice, naming it (:func:`unique_rows`, whole-batch
  comparisons of neighbouring rows);
- ``"last"``: the rows with the greatest ``order_by`` value of each identity (a window over
  the identity), then checked as with ``"error"``, so a tie is refused too;
- ``"combine"``: one row per identity, its value a Spark SQL aggregate of the values.

(SQL text and DataFrame methods only, not ``pyspark.sql.functions``, whose columns are of
the classic kind in a process that also has a classic session, whatever the DataFrame.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from ..errors import InvalidArgumentError

#: The column holding the caller's ``order_by`` values while duplicates are resolved.
ORDER = "__pyref_order"
NEWEST = "__pyref_newest"
POLICIES = ("error", "last", "combine")
_FUNCTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def resolve_duplicates(rows: DataFrame, identity: Sequence[str], policy: str, combine: str | None
                       ) -> tuple[DataFrame, bool]:
    """``rows`` as the policy leaves them, and whether the write must still check that no
    identity repeats."""
    if policy not in POLICIES:
        raise InvalidArgumentError(f"duplicates is one of {', '.join(POLICIES)}, got {policy!r}")
    ordered = ORDER in rows.columns
    if ordered != (policy == "last"):
        raise InvalidArgumentError("order_by is needed by duplicates='last', and only by it")
    if (combine is not None) != (policy == "combine"):
        raise InvalidArgumentError("combine (an aggregate function name) is needed by duplicates='combine', "
                                   "and only by it")
    if policy == "last":
        over = ", ".join(f"`{name}`" for name in identity)
        newest = rows.selectExpr("*", f"max(`{ORDER}`) OVER (PARTITION BY {over}) AS `{NEWEST}`")
        return newest.where(f"`{ORDER}` = `{NEWEST}`").drop(ORDER, NEWEST), True
    if policy == "combine":
        if combine is None or not _FUNCTION.fullmatch(combine):
            raise InvalidArgumentError(f"combine names a Spark SQL aggregate function (sum, max, ...), got {combine!r}")
        groups = [*identity, *(["key_group"] if "key_group" in rows.columns else [])]
        aggregates = {"value": combine, **({"ttl_timestamp": "max"} if "ttl_timestamp" in rows.columns else {})}
        combined = rows.groupBy(*groups).agg(aggregates)
        for column, function in aggregates.items():
            combined = combined.withColumnRenamed(f"{function}({column})", column)
        return combined.select(*rows.columns), False
    return rows, True


def unique_rows(identity: Sequence[str], label: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` (a task's rows sorted by key group and identity) unchanged, or
    :class:`~pyref.InvalidArgumentError` naming the first identity that two rows share."""
    previous: pa.RecordBatch | None = None
    for batch in batches:
        if not batch.num_rows:
            continue
        # The previous batch's last row against this one's first, then this one's neighbours:
        # two one-row slices are joined, never the batch itself (that would copy every row).
        if previous is not None:
            _refuse_repeats(pa.Table.from_batches([previous, batch.slice(0, 1)]).combine_chunks().to_batches()[0],
                            identity, label)
        _refuse_repeats(batch, identity, label)
        previous = batch.slice(batch.num_rows - 1, 1)
        yield batch


def _refuse_repeats(batch: pa.RecordBatch, identity: Sequence[str], label: str) -> None:
    repeated = _repeats(batch, identity)
    if len(repeated):
        row = batch.slice(int(repeated[0]), 1).to_pylist()[0]
        shown = ", ".join(f"{name}={row[name]!r}" for name in identity)
        raise InvalidArgumentError(
            f"two rows of {shown}: stored, which one a reader gets would depend on Spark's order; pass "
            "duplicates='last' with order_by=COLUMN, or duplicates='combine' with combine='sum' (say)",
            state=label)


def _repeats(batch: pa.RecordBatch, identity: Sequence[str]):
    """Indices of rows whose identity (and key group) equals the next row's."""
    if batch.num_rows < 2:
        return []
    same = None
    for name in ["key_group", *identity]:
        for column in _leaves(batch.column(name)):
            equal = pc.fill_null(pc.equal(column.slice(1), column.slice(0, len(column) - 1)), False)
            same = equal if same is None else pc.and_(same, equal)
    return pc.indices_nonzero(same).to_numpy()


def _leaves(column: pa.Array) -> list[pa.Array]:
    """A column's comparable parts: a struct's (a tuple key's) fields, recursively."""
    if pa.types.is_struct(column.type):
        return [leaf for field in column.flatten() for leaf in _leaves(field)]
    return [column]
