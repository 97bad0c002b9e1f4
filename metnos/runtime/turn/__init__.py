"""The pure, deterministic decision pieces of the turn loop (seeds/002 ch. 2).

One idea per module: ``prefilter`` (rank the catalogue), ``piping``
(``from_step`` and ``{{stepN.field}}``), ``validation`` (JSON Schema),
``shape`` (the E+(F|A)? FSM), ``remediation`` (ch. 4-ter registry),
``vaglio`` (guard and judge), ``guards`` (caps, duplicate reads),
``scratchpad`` (large observations), ``failures`` (how a turn ends badly),
``settings`` (tunables from an env mapping). None of them does I/O, reads
a clock or draws a random number: the loop feeds them everything.
"""
