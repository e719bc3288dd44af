"""pyref: reference implementation of the portable savepoint format."""

__version__ = "0.1.0"
