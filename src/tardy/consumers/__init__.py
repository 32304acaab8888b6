"""The consumer side: what the people who read the numbers read and hear.

- ``notifications``: events (a publication, a restatement awaiting review, an alert) kept in
  the data home's outbox and delivered to the project's sinks (a JSON-lines file, a webhook).
"""
