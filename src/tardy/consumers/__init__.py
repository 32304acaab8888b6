"""The consumer side: what the people who read the numbers read and hear.

- ``versions``: the publications' store (``tardy.published_versions``): every published
  model's prod versions, named ``table_name@v<N>`` and re-readable by Delta time travel;
- ``publish``: publishing and its fan-out (a new publication's release note, its event in the
  outbox, ``tardy.outbox.notifications``, the published and final views, the status views);
- ``aliases``: ``<schema>_final.<table>``, the final periods of a model's latest publication
  (``<schema>_published.<table>``, ``tardy.consumers.versions``, holds them all);
- ``notes``: the release notes of each published version (``$TARDY_HOME/releases/``);
- ``rereads``: a published version re-read (``tardy export``, ``tardy show``), checked against
  its recorded hash;
- ``fingerprint``: order-independent content hashes of tables, comparable across data homes;
- ``status``: provisional and final, the data watermark and lateness (``tardy status``);
- ``card``: a published model's data product card (``tardy card TABLE``);
- ``history``: a key's story, its bronze records and restatements (``tardy history <key>``);
- ``revisions``: how much restatements moved each published model since first published.
"""
