"""Progress bars that are bars on a terminal and plain lines anywhere else.

tqdm redraws its bar in place with carriage returns. A terminal shows one line that moves; a pipe, a file,
CI's log or compose's log collector keeps every redraw, so a log fills with ``\\r``-joined lines.
:class:`ProgressBar` is tqdm when its stream is a terminal; otherwise it prints the same figures (without the
bar drawing) as ordinary lines: at most one every ``line_interval`` seconds while it runs, and a last one when
it closes (a bar that vanishes on a terminal, ``leave=False``, prints that last line only if it ran long
enough to print one before, so short steps stay quiet in logs).

Use it wherever tqdm would be used: ``ProgressBar(iterable, desc=..., disable=...)``.
"""

from __future__ import annotations

import re
import sys
import time
from typing import Any, TextIO

from tqdm import tqdm

LINE_INTERVAL_S = 15.0
"""Seconds between two progress lines when the stream is not a terminal (a log line every 15 s is
frequent enough to see that a step moves, rare enough to keep a long run's log readable)."""

_BAR_FIELD = re.compile(r"\|?\{bar(?::[^}]*)?\}\|?")


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an open terminal (False for pipes, files, closed or odd streams)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def line_format(bar_format: str | None) -> str | None:
    """``bar_format`` with the bar drawing (``{bar}`` and its ``|`` frame) taken out; None stays None."""
    if bar_format is None:
        return None
    return re.sub(r" {2,}", " ", _BAR_FIELD.sub(" ", bar_format))


class ProgressBar(tqdm):  # type: ignore[misc]  # tqdm ships no annotations
    """tqdm on a terminal; plain, rate-limited lines without carriage returns elsewhere.

    Args:
        *args, **kwargs: as for ``tqdm`` (``file`` defaults to stderr, as there).
        line_interval: the least number of seconds between two lines when not on a terminal.

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> for _ in ProgressBar(range(3), desc="files", file=out):
        ...     pass
        >>> "\\r" in out.getvalue(), out.getvalue().startswith("files: 100% 3/3")
        (False, True)
    """

    def __init__(self, *args: Any, line_interval: float = LINE_INTERVAL_S, **kwargs: Any) -> None:
        stream: TextIO = kwargs.get("file") or sys.stderr
        # Set before tqdm's __init__, which draws the bar once already.
        self.lines = not is_terminal(stream)
        self._line_interval = line_interval
        self._line_at = time.monotonic()  # the first line comes one interval in: a short step prints only its end
        self._lines_printed = 0
        self._printed: tuple[float, Any] | None = None  # (n, postfix) of the last line
        if self.lines:
            if kwargs.get("bar_format") is None:
                kwargs["ncols"] = 0  # tqdm's own stats line without the bar
            else:
                kwargs["bar_format"] = line_format(kwargs["bar_format"])
            kwargs["dynamic_ncols"] = False
        super().__init__(*args, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool | None:
        if not self.lines:
            shown: bool | None = super().display(msg, pos)
            return shown
        if msg is not None:
            return False  # tqdm blanking its line: there is no line to take back in a log
        if time.monotonic() - self._line_at < self._line_interval:
            return False
        self._print_line()
        return True

    def _print_line(self) -> None:
        self.fp.write(self.__str__() + "\n")
        getattr(self.fp, "flush", lambda: None)()
        self._line_at = time.monotonic()
        self._lines_printed += 1
        self._printed = (self.n, self.postfix)

    def clear(self, nolock: bool = False) -> None:
        if not self.lines:
            super().clear(nolock)

    def moveto(self, n: int) -> None:
        if not self.lines:
            super().moveto(n)

    def close(self) -> None:
        if not getattr(self, "lines", False) or getattr(self, "disable", True):
            super().close()
            return
        # leave=None is tqdm's "keep the outermost bar only".
        keep = self.leave if self.leave is not None else self.pos == 0
        if (keep or self._lines_printed) and self._printed != (self.n, self.postfix):
            with self._lock:
                self._print_line()
        self.disable = True
        self._decr_instances(self)
