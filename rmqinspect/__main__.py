# the signal handlers first (cli.lifecycle: a Ctrl-C while the rest is imported exits 130 without a traceback)
from .cli import lifecycle

lifecycle.install()

from .cli.main import main  # noqa: E402

if __name__ == "__main__":
    main()
