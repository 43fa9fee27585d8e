"""The run's progress without a terminal (CI, ``| tee``, compose logs): plain lines, one per epoch (issue 22).

tests/unit/pipeline/test_pipeline_summary.py has the bars drawn on a terminal.
"""

from __future__ import annotations

import io
import os
import re

from saintpipe.pipeline.progress import EpochBars
from saintpipe.trainer.progress import TrainerProgress

LINE = re.compile(r"^epoch (\d)/3 +(\d+)% \d\d:\d\d, (\S+) subgraphs/s, loss (\S+), val (\S+)$")


def run_three_epochs(out, **kw) -> None:
    bars = EpochBars(3, file=out, **kw)
    bars.update(TrainerProgress(epoch=0, epoch_fraction=0.5, steps=1, subgraphs=1, loss=2.0))
    bars.update(TrainerProgress(epoch=1, epoch_fraction=0.0, steps=2, subgraphs=2, loss=1.5, val_score=0.6))
    bars.update(TrainerProgress(epoch=2, epoch_fraction=0.5, steps=5, subgraphs=5, loss=1.0, val_score=0.7))
    bars.update(TrainerProgress(epoch=3, steps=7, subgraphs=7, loss=0.5, val_score=0.8, done=True))
    bars.close()


def test_a_pipe_gets_one_plain_line_per_epoch_with_its_figures():
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "w") as pipe, os.fdopen(read_fd) as reader:
        run_three_epochs(pipe)
        pipe.close()
        text = reader.read()
    assert "\r" not in text and "\x1b" not in text and "|" not in text
    parsed = [LINE.match(line) for line in text.splitlines()]
    assert all(parsed), text
    assert [(m[1], m[2]) for m in parsed] == [("1", "100"), ("2", "100"), ("3", "100")]
    assert [(m[4], m[5]) for m in parsed] == [("1.5000", "0.6000"), ("1.0000", "0.7000"), ("0.5000", "0.8000")]


def test_a_long_epoch_also_gets_lines_in_between():
    out = io.StringIO()
    run_three_epochs(out, line_interval=0.0)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert "epoch 1/3  50% 00:00, - subgraphs/s, loss 2.0000, val -" in lines
    assert "epoch 3/3  50% 00:00, - subgraphs/s, loss 1.0000, val 0.7000" in lines
    assert lines[-1].startswith("epoch 3/3 100%") and lines[-1].endswith("loss 0.5000, val 0.8000")


def test_switched_off_prints_nothing_on_a_pipe_either():
    out = io.StringIO()
    run_three_epochs(out, enabled=False, line_interval=0.0)
    assert out.getvalue() == ""
