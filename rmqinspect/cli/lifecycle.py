"""Signals, in one place: what SIGINT, SIGTERM and SIGXFSZ do to any command.

SIGINT (Ctrl-C) and SIGTERM raise ``Interrupted`` in the main thread, between two Python steps, so every
``finally`` runs: a JSON array is closed, outputs not yet renamed into place are removed (``sinks.staging``),
worker processes are shut down (``store.walk.parallel``); the command then exits 128 + the signal number (130,
143), the shells' convention. The first signal makes both ignored, so a second Ctrl-C cannot cut the clean-up
short. SIGXFSZ (a file-size limit, ``ulimit -f``) is ignored, so the write fails with EFBIG and is reported
like a full disk (exit 5) instead of killing the process with a core dump.
"""

from __future__ import annotations

import signal
import sys
import types

INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
_installed: list[bool] = []


class Interrupted(BaseException):
    """A SIGINT or SIGTERM arrived. A BaseException (like KeyboardInterrupt) so no ``except Exception`` in a
    command mistakes it for damage."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def _raise_interrupted(signum: int, frame: types.FrameType | None) -> None:
    for s in INTERRUPTS:
        signal.signal(s, signal.SIG_IGN)  # the clean-up runs to its end
    raise Interrupted(signum)


def _unraisable(hook):
    """An interrupt raised while a finalizer ran (a generator closed, ``__del__``) is "ignored" by Python, with a
    traceback on stderr, and the command would run on with the signal lost. Said nothing of, and delivered again
    a moment later (a one-shot timer: raising it here, or at once, would land in the finalizer again)."""

    def on_unraisable(u) -> None:
        if isinstance(u.exc_value, Interrupted):
            _again[:] = [u.exc_value.signum]
            signal.signal(signal.SIGALRM, _raise_again)
            signal.setitimer(signal.ITIMER_REAL, 0.005)
            return
        hook(u)

    return on_unraisable


_again: list[int] = []


def _raise_again(signum: int, frame: types.FrameType | None) -> None:
    if _again:
        raise Interrupted(_again[0])


def install() -> None:
    """Set the handlers (``main`` only, in the main thread: a library caller keeps its own). Once per process."""
    if _installed:
        return
    _installed.append(True)
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    for s in INTERRUPTS:
        if signal.getsignal(s) is not signal.SIG_IGN:  # nohup / a background job's ignored SIGINT stays ignored
            signal.signal(s, _raise_interrupted)
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def exiting() -> None:
    """The command is over (its output complete, or its error said): a signal now would only interrupt Python's
    own exit (the atexit join of worker threads) with a traceback, so both are ignored from here."""
    for s in INTERRUPTS:
        if signal.getsignal(s) is _raise_interrupted:
            signal.signal(s, signal.SIG_IGN)
    if _again:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _again.clear()


def release_frames(e: BaseException) -> None:
    """Clear the frames an interrupted walk left in ``e``'s traceback, so the generators suspended in them are
    closed now (their ``finally`` shuts worker pools down and removes handover files) rather than at exit."""
    import traceback

    traceback.clear_frames(e.__traceback__)


def exit_interrupted(e: Interrupted) -> None:
    sys.exit(e.exit_code)
