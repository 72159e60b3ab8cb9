"""Production output of ``rebuild``: the files the broker's dispatcher writes (ConsumeQueue, IndexFile, the 5.x
RocksDB consume queue), written only into new directories. Sinks know the broker's on-disk append rules and
nothing about the CommitLog walk; they import only ``formats`` and ``store``."""
