"""The cognitive cascade in front of the turn loop (seeds/002, "run_turn").

L0 (:mod:`metnos.runtime.cascade.consult`): a request seen before, whose plan the user
approved, runs again with no model call. L1: requests that differ only in
their slot values share a plan template learnt from the log. L2
(:mod:`metnos.runtime.cascade.validator`): a proposed plan is checked before it runs.
L3 is the loop itself. Every entry is a projection of the log
(projections/plans.py); every consultation is an event of the turn. A plan
replays what a turn did, never what it read (:mod:`domain.cascade.provenance`);
a template a later turn contradicts is dropped
(:mod:`metnos.runtime.cascade.contradiction`).
"""
