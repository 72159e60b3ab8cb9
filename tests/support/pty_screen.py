"""Run rmqinspect with its standard output on a real pseudo-terminal of a given width (TIOCSWINSZ), as a person's
terminal is: the program finds the width the way it does on any terminal (the tty's window size; COLUMNS and LINES
are removed from its environment). Standard error goes to a pipe, kept apart (no progress bar is drawn there)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class Screen:
    text: str  # what the terminal received on stdout, ANSI codes removed, lines ended by "\n"
    stderr: str
    exit_code: int
    columns: int

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def overlong(self) -> list[str]:
        """Lines wider than the terminal that are not one identifier alone (the only kind allowed to be)."""
        from rich.cells import cell_len

        return [line for line in self.lines if cell_len(line) > self.columns and len(line.split()) != 1]

    def tokens(self) -> set[str]:
        """Every whole token on the screen (split at blanks, commas and table rules)."""
        return {t for line in self.lines for t in re.split(r"[\s,|()\[\]]+", line) if t}


def run_on_terminal(args: list[str], columns: int, rows: int = 50, cwd: str | None = None,
                    timeout: float = 60, extra_env: dict[str, str] | None = None) -> Screen:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    env.update(extra_env or {})
    proc = subprocess.Popen([sys.executable, "-m", "rmqinspect", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE, cwd=cwd, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    code = proc.wait(timeout)
    text = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r\n", "\n").replace("\r", "")
    return Screen(text, err, code, columns)
