"""The builtin scheduler: requests with a schedule (seeds/000, seeds/002 ch. 11.2).

Kept import-light: the schedules projection imports ``due`` from here.
"""
