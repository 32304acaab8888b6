"""The restatement engine: restate exactly the intervals late data changes, away from prod.

One module per step, in the order a restatement runs them:

- ``detect``: the days late bronze rows change in the models that read bronze (the manifest)
  and the arrival watermark;
- ``closure``: which intervals of every downstream model a changed day reaches, from the DAG
  and each model's own metadata;
- ``stage``: one write per model into its staged (dev) table, for all its intervals;
- ``audit``: every audit of a model over all its intervals, in one query;
- ``diff``: staged against prod, one read per table: counts, sums, changed keys and days,
  and the circuit breaker;
- ``promote``: one Delta commit per table with changed days; rollback;
- ``log``: the restatement log;
- ``plan``: what a restatement restates (the models and days, from the closure) and the
  targets it moves (the arrival watermark, the circuit breaker's threshold);
- ``machine``: staging a plan: stage, audit, diff, the circuit breaker, each step logged;
- ``lifecycle``: every transition after staging, one table over the log's actions: promote,
  discard, rollback, and recovery of an interrupted one; a promotion returns what it
  committed, for the caller to publish;
- ``outcome``: what a command returns (``Outcome``, ``Status``) and its errors;
- ``restate``: the commands (``restate``, ``promote``/``discard``/``rollback``) under the
  lock, after recovering what the log says was interrupted, each calling the caller's
  publisher after a promotion (``tardy.requests.restatements`` passes one that calls
  ``tardy.consumers.publish``).

SQLMesh is reached only through ``sqlmesh_api`` and Delta only through ``delta``; nothing here
renders output (the CLI does).
"""
