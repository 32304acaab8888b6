"""The consumer side: what the people who read the numbers read and hear.

- ``aliases``: ``<schema>_final.<table>``, the final periods of a model's latest publication
  (``<schema>_published.<table>``, ``tardy.consumers.versions``, holds them all);
- ``notifications``: events (a publication, a restatement awaiting review, an alert) kept in
  the data home's outbox and delivered to the project's sinks (a JSON-lines file, a webhook).
"""
