"""Running one executor: checks, the sandboxed spawn, caps, the outcome.

Entry point: ``metnos.mechanisms.invocation.runner.invoke``.
"""
