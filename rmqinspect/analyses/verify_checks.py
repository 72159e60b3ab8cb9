"""The checks ``verify`` can run, in the order it runs and reports them: named here, apart from ``analyses.verify``
(which imports numpy and the walk), so that the command's options and ``--help`` are read without those imports."""

ALL_CHECKS = ("structure", "crc", "cq", "index", "checkpoint")
