"""``ProgressBar``: tqdm on a terminal, plain lines without carriage returns on pipes and files (issue 22)."""

from __future__ import annotations

import io
import os
import time

from saintpipe.core.bars import ProgressBar, is_terminal, line_format


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_plain_lines_at_the_interval_and_a_last_one():
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "w") as pipe, os.fdopen(read_fd) as reader:
        assert not is_terminal(pipe)
        bar = ProgressBar(total=6, desc="checksums", unit="file", file=pipe, line_interval=0.05)
        for _ in range(6):
            time.sleep(0.03)
            bar.update(1)
        bar.close()
        pipe.close()
        text = reader.read()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert 2 <= len(lines) <= 6, lines  # some lines while it ran (not one per update), then the last
    assert all(line.startswith("checksums: ") for line in lines)
    assert lines[-1].startswith("checksums: 100% 6/6 ["), lines[-1]
    assert "file/s" in lines[-1] and "█" not in text


def test_a_short_step_prints_only_its_end_and_a_vanishing_bar_nothing():
    out = io.StringIO()
    for _ in ProgressBar(range(1000), desc="rows", file=out):
        pass
    assert out.getvalue().count("\n") == 1 and out.getvalue().startswith("rows: 100% 1000/1000")
    quiet = io.StringIO()
    with ProgressBar(total=10, desc="eval", file=quiet, leave=False) as bar:
        bar.update(10)
    assert quiet.getvalue() == ""  # leave=False: gone on a terminal, never printed in a log


def test_a_long_vanishing_bar_ends_with_its_last_line_once():
    out = io.StringIO()
    bar = ProgressBar(total=4, desc="pre-sampling", file=out, leave=False, line_interval=0.02)
    for _ in range(4):
        time.sleep(0.03)
        bar.update(1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("pre-sampling: 100% 4/4")
    assert sum(line.startswith("pre-sampling: 100%") for line in lines) == 1  # not repeated by close()


def test_a_custom_format_loses_only_the_bar_drawing():
    fmt = "{desc} {percentage:3.0f}%|{bar:24}| {elapsed}{postfix}"
    assert line_format(fmt) == "{desc} {percentage:3.0f}% {elapsed}{postfix}"
    assert line_format("{l_bar}{bar}{r_bar}") == "{l_bar} {r_bar}"
    assert line_format(None) is None
    out = io.StringIO()
    bar = ProgressBar(total=100, desc="epoch 1/2", file=out, bar_format=fmt)
    bar.n = 100
    bar.set_postfix_str("12.0 subgraphs/s, loss 0.5000", refresh=False)
    bar.close()
    assert out.getvalue().startswith("epoch 1/2 100% 00:00, 12.0 subgraphs/s, loss 0.5000\n")


def test_a_terminal_still_gets_tqdm_bars():
    out = Terminal()
    with ProgressBar(total=3, desc="files", file=out, mininterval=0) as bar:
        bar.update(3)
    assert "\r" in out.getvalue() and "100%|" in out.getvalue()  # redrawn in place, with the bar


def test_a_real_terminal_is_recognised():
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            assert is_terminal(tty) and not ProgressBar(total=1, file=tty, disable=True).lines
    finally:
        os.close(master)
        os.close(slave)
    closed = io.StringIO()
    closed.close()
    assert not is_terminal(closed) and not is_terminal(object())
