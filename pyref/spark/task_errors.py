"""pyref's typed errors raised in Spark tasks, given back to the driver as themselves.

An error in a Python task reaches the driver as Spark's ``PythonException`` (or, from a
data source's planning worker, another pyspark exception) whose message holds the task's
traceback as text. Its last line for a pyref error is ``pyref.errors.<Class>: <message>``,
which :func:`task_error` recognises: the class is looked up by name among pyref's error
classes (nothing from the message is evaluated or unpickled), and the message's
``[file=..., state=..., bytes=a..b]`` part becomes the error's fields again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from .. import errors
from ..errors import SavepointError

#: pyref's error classes by name: the only classes a message can name.
_CLASSES = {name: cls for name, cls in vars(errors).items()
            if isinstance(cls, type) and issubclass(cls, SavepointError)}
#: A pyref error's line in a Python traceback, up to the next blank line (which ends a
#: traceback's exception), the SQLSTATE line Spark Connect appends, or the end of the text.
_RAISED = re.compile(r"^pyref\.errors\.(?P<cls>\w+): (?P<message>.*?)(?=\n\s*\n|\n SQLSTATE: |\Z)",
                     re.MULTILINE | re.DOTALL)
#: The fields SavepointError._format appends to its reason, in its order.
_WHERE = re.compile(r"(?P<reason>.*) \[(?:file=(?P<path>.*?))?(?:, )?(?:state=(?P<state>.*?))?(?:, )?"
                    r"(?:bytes=(?P<start>\d+)\.\.(?P<end>\d+))?\]", re.DOTALL)


def task_error(exc: BaseException) -> SavepointError | None:
    """The pyref error that ``exc`` (raised by Spark) reports from a task, or None. Of
    chained errors in one traceback, the last (outermost) pyref error is taken."""
    if not type(exc).__module__.startswith(("pyspark.", "py4j.")):
        return None
    found = list(_RAISED.finditer(str(exc)))
    if not found or found[-1]["cls"] not in _CLASSES:
        return None
    cls, message = _CLASSES[found[-1]["cls"]], found[-1]["message"].rstrip()
    where = _WHERE.fullmatch(message)
    if where is not None:
        start, end = where["start"], where["end"]
        rebuilt = cls(where["reason"], path=where["path"], state=where["state"],
                      byte_range=(int(start), int(end)) if start is not None else None)
        if str(rebuilt) == message:  # else a reason or path held text like the fields: keep it whole
            return rebuilt
    return cls(message)


@contextmanager
def typed_errors() -> Iterator[None]:
    """Re-raise a Spark failure that reports a pyref error from a task as that error (the
    Spark exception as its cause); anything else passes unchanged::

        with typed_errors():
            df.write.format("savepoint").option("operator", "op").option("state", "s").save(path)
    """
    try:
        yield
    except Exception as exc:
        typed = task_error(exc)
        if typed is None:
            raise
        raise typed from exc
