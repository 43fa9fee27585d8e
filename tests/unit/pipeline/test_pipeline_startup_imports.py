"""What the local run's driver imports to start the trainers: not torch, which only the trainer actors need
(importing it in the driver put 1-2 s before the trainer actor was even created)."""

from __future__ import annotations

import pickle
import subprocess
import sys


def test_the_driver_creates_trainer_actors_without_importing_torch():
    # Everything runner._launch_trainers imports, in a fresh interpreter (this one may have torch already).
    code = ("import sys; import saintpipe.pipeline.runner, saintpipe.trainer.actor, saintpipe.trainer.assemble, "
            "saintpipe.trainer.eval_memory, saintpipe.services.feature_shard.cache; "
            "print('torch' in sys.modules, 'ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]  # ray: the actor module was really imported


def test_the_driver_reads_a_trainer_result_without_importing_torch():
    # The driver unpickles every rank's result and snapshot (failure(), wait(), snapshot()): that must not load
    # torch in it while training starts (it did: the class lived in the loop's module).
    from saintpipe.trainer.result import TrainResult
    from saintpipe.trainer.timing import TimeBreakdown

    result = TrainResult(test_score=0.5, val_score=0.5, epochs=1, steps=2, subgraphs=2, stopped_early=False,
                         resumed_from_step=-1, times=TimeBreakdown(compute=1.0), step_losses=[1.0, 0.5])
    code = ("import pickle, sys; r = pickle.loads(sys.stdin.buffer.read()); "
            "print('torch' in sys.modules, r.steps, r.step_losses)")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(result), capture_output=True,
                         check=True).stdout.decode()
    assert out.split() == ["False", "2", "[1.0,", "0.5]"]
