"""The storage interface and its backends, under the name the rest of pyref imports
them by. They live in :mod:`pyref.storage`, one module per backend."""

from .storage import *  # noqa: F403
from .storage import __all__  # noqa: F401
