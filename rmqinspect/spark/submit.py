"""Driver script for spark-submit: ``spark-submit --master spark://host:7077 $(python -m rmqinspect.spark.submit
--path) spark stats /mnt/stores/*/store``. Runs the normal rmqinspect CLI; the session uses the submitted master."""

import sys

from rmqinspect.cli.main import main

if __name__ == "__main__":
    if sys.argv[1:] == ["--path"]:
        print(__file__)
    else:
        main()
