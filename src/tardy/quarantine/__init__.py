"""Quarantine review (``tardy quarantine``): the stewards' decisions on quarantined records.

- ``listing``: every source's quarantined records (the models tagged ``quarantine``), their
  age on the feed's clock and their review; counts per source and reason.
- ``reviews``: the append-only review table ``tardy.quarantine_reviews``.
- ``fixes``: a fix as a new landing record, checked by the source's rules, written whole.
- ``steward``: reject, duplicate, fix.
"""
