"""What the local run's driver imports to start the trainers: not torch, which only the trainer actors need
(importing it in the driver put 1-2 s before the trainer actor was even created)."""

from __future__ import annotations

import subprocess
import sys


def test_the_driver_creates_trainer_actors_without_importing_torch():
    # Everything runner._launch_trainers imports, in a fresh interpreter (this one may have torch already).
    code = ("import sys; import saintpipe.pipeline.runner, saintpipe.trainer.actor, saintpipe.trainer.assemble, "
            "saintpipe.trainer.eval_memory, saintpipe.services.feature_shard.cache; "
            "print('torch' in sys.modules, 'ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]  # ray: the actor module was really imported
