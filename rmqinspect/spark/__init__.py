"""rmqinspect on Apache Spark (PySpark 4): a session helper, the ``rocketmq`` Python Data Source, and the
fleet jobs (export, stats, find, verify, diff). Every task runs the same per-commitlog-file functions as the
local engine (``rmqinspect.analyses.export``). Importing this package does not import pyspark."""
