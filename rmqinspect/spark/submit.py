"""Driver script for spark-submit: ``spark-submit --master spark://host:7077 $(python -m rmqinspect.spark.submit
--path) spark stats /mnt/stores/*/store``. Runs the package's entry point (``python -m rmqinspect``, the normal
CLI) by name, so the spark layer does not import the cli layer above it; the session uses the submitted master."""

import runpy
import sys

if __name__ == "__main__":
    if sys.argv[1:] == ["--path"]:
        print(__file__)
    else:
        runpy.run_module("rmqinspect", run_name="__main__", alter_sys=True)
