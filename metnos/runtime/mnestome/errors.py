"""Errors of the mnestome, printed as one line by the CLI."""

from domain.errors import MetnosError


class MnestomeError(MetnosError):
    """The mnestome cannot do what was asked (bad key, time running backwards, no such mnest)."""
