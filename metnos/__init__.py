"""Metnos: a local-first personal agent runtime on an append-only event log."""

__version__ = "0.1.0"
