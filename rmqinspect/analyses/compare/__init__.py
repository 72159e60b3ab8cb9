"""The consume-queue comparisons, one module each, named ``<what is checked>_vs_<what it is checked against>``:

* ``cq_vs_commitlog``: every ConsumeQueue entry against the CommitLog record it points to (``cq --join``);
* ``cq_vs_cq``: two consume-queue sets entry by entry, e.g. RocksDB against files (``rocksdb-cq --compare-file-cq``);
* ``rebuild_vs_store``: what the dispatcher would write against the store's ConsumeQueue and IndexFile files
  (``rebuild --dry-run``).
"""
