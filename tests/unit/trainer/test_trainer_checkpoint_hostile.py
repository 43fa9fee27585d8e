"""A crafted checkpoint cannot run code: it is loaded with weights_only=True and refused with a clear error."""

from __future__ import annotations

import os

import pytest
import torch

from saintpipe.core.errors import DatasetError
from saintpipe.trainer.run_dir.checkpoint import Checkpointer
from tests.unit.trainer.test_trainer_feeds_loop import ListFeed, make_loop, small_graph


class _RunsCode:
    """Unpickling this calls os.system: what an attacker would put into latest.pt."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_checkpoint_is_refused_and_its_code_never_runs(tmp_path):
    marker = tmp_path / "the-payload-ran"
    ckpt = Checkpointer(tmp_path / "ckpt")
    torch.save({"train_state": _RunsCode(str(marker))}, ckpt.latest)
    with pytest.raises(DatasetError) as refused:
        ckpt.load()
    message = str(refused.value)
    assert message.startswith(f"{ckpt.latest}: refused: the checkpoint holds Python objects"), message
    assert "GLOBAL posix.system" in message and "weights_only" not in message, message
    assert not marker.exists()
    assert ckpt.latest.exists()  # left for the user to inspect, not deleted


def test_a_crafted_checkpoint_stops_a_trainer_before_its_first_step(tmp_path):
    marker = tmp_path / "the-payload-ran"
    torch.save({"train_state": _RunsCode(str(marker))}, tmp_path / "latest.pt")
    with pytest.raises(DatasetError, match="refused"):
        make_loop(small_graph(), tmp_path, epochs=1, patience=0)
    assert not marker.exists()


def test_what_the_trainer_saves_loads_under_weights_only(tmp_path):
    graph = small_graph()
    make_loop(graph, tmp_path, epochs=10, max_steps=3, patience=2, checkpoint_every_steps=1).run(ListFeed(graph))
    saved = torch.load(tmp_path / "latest.pt", weights_only=True)  # would raise on anything but plain data
    assert saved["train_state"] and saved["progress"]["subgraphs"] == 3
    assert make_loop(graph, tmp_path, epochs=10, patience=2).state.steps == 3
