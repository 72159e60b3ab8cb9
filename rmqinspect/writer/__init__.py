"""Writers of broker-faithful stores, for fixtures and benchmarks. They write only into new directories."""
