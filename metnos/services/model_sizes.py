"""The embedded models one can install, by size: what a command line offers before anything runs.

Apart from metnos.services.models so that listing them loads nothing of the model server.
"""

from metnos.mechanisms.llm.model_files import DEFAULT_SIZE, MODELS

__all__ = ["DEFAULT_SIZE", "MODELS"]
