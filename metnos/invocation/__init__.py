"""Running one executor: checks, the sandboxed spawn, caps, the outcome.

Entry point: ``metnos.invocation.runner.invoke``.
"""
