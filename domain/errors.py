"""The root of Metnos's own errors: each carries a one-line message for people."""


class MetnosError(Exception):
    """An error the CLI prints as one line, without a traceback."""
