"""The commit-log walk: one home for what a slot of the log is and how the log is walked.

- ``kinds``: the one vocabulary (``Kind`` of a slot, ``EntryKind`` of a DLedger entry, ``DamageKind`` of a
  damaged range) and ``Damage``, the range-with-reason every checker of the walk reports;
- ``records``: the record scan (``scan_buffer``, the broker's ``checkMessageAndReturnSize``), ``RecordRun`` /
  ``Record`` / ``Gap`` events, ``decode_slot``, and the walk of a plain file (``walk_records``);
- ``entries``: the walk of a DLedger data file (the entries around the records) and DLedger's own entry walk;
- ``file``: ``walk_file``, one file's walk whatever frames its records;
- ``resync``: the resynchronising walk (``walk_batches``, ``walk_with_resync``): past damage to the next valid
  record, typed events (``RecordRun`` / ``Record`` / ``BlankRecord`` / ``Damage``) for verify, summary, salvage;
- ``parallel``: the engine that runs a walk's per-file (or per-chunk) work in worker processes.

The reader (``store.commitlog.CommitLog``) owns the iterator across files (``walk``, ``scan``, ``messages``) and
raises ``CorruptDataError``; callers choose the policy (stop, skip, resync). Nothing here imports the package's
``__init__`` (kept empty of imports so that loading one of these modules loads no other).
"""
