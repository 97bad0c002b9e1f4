"""Which layers of the executors' fence are active here (``metnos sandbox status``)."""

from metnos.mechanisms.sandbox.bwrap import require_sandbox
from metnos.mechanisms.sandbox.status import format_status, status

__all__ = ["format_status", "require_sandbox", "status"]
