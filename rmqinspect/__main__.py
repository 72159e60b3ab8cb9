"""``python -m rmqinspect``: the signal handlers first, then the commands are imported (a signal while they are
is one line and 130/143 like any other, never a traceback). Here, above cli/, so that cli.lifecycle never imports
cli.main (which imports it)."""

import sys

from .cli.lifecycle import Interrupted, exit_interrupted, install


def entry() -> None:
    install()
    try:
        from .cli.main import main
    except Interrupted as e:
        sys.stderr.write(f"rmqinspect: error: interrupted by {e.name}\n")
        exit_interrupted(e)
    main()


if __name__ == "__main__":
    entry()
