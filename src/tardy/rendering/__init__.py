"""Rendering, at the edge: every table ``tardy`` prints (laid out to fit 80 columns) and the
HTML pages of ``tardy report`` (``tardy.rendering.html``).

One function per table takes plain data or a domain object and returns a Rich renderable;
the ``render_*`` functions print a command's whole human output (its lines and tables) on a
console. Nothing here computes: the domain modules do, and ``--json`` never comes here.

Layout rules, so that a table fits an 80-column terminal and still says everything:

* A model name or a restatement id is never wrapped or cut: its column is ``no_wrap`` and at
  least as wide as the longest one. No column uses Rich's ``ellipsis`` overflow; a cell that
  cannot fit folds onto the next line instead.
* Intervals read ``2026-01-01 .. 2026-01-07`` (one day: ``2026-01-10``), several joined by
  ", "; they wrap between intervals, and inside one only when it alone is too wide.
* A change is two lines, ``5,360,334`` over ``→ 5,360,412``; other cells wrap at spaces.
* A table with more columns than 80 can hold switches layout: lateness has a row per source
  (ten sources read as well as two), the diff has a header row per model carrying its
  measure, the pending late data has a section per kind, and the log stacks each
  restatement's fields in three columns.

Modules: ``cells`` (the shared cells), ``restatement``, ``status``, ``summary``, ``history``,
``engine``, ``versions``, ``consumers`` (the card), ``models`` (the models commands), ``html``.
"""
