"""The trainer: GNN models with the scheduled matmul order, the loop and its Ray actors
(docs/explanation/trainer.md).

The public names import from the package; they load on first use, so importing the package loads
neither torch nor Ray::

    from saintpipe.trainer import TrainerConfig, ModelConfig, TrainLoop

Modules. Models: ``models`` (``GNN``, ``build_model``, the loss), ``layers`` (GCN, GraphSAGE, GAT,
MixHop), ``ops`` (layer operations in the scheduler's order), ``schedule`` (the matmul-order scheduler),
``sparse`` (a subgraph's CSR as a layer operand). Training: ``config`` (``TrainerConfig``,
``ModelConfig``), ``loop`` (``TrainLoop``, ``TrainResult``), ``step`` (one optimizer step, early
stopping), ``batch`` (what a step works on; its subgraphs and features come from
:mod:`saintpipe.minibatch`), ``losses``, ``timing``, ``progress`` (where a trainer's training stands),
``run_dir`` (what a trainer keeps in the run directory: ``outputs``, ``model_file``, ``checkpoint``),
``metrics``. Running it: ``assemble`` (one trainer wired to the dataset, pool and shards:
``assemble_trainer``, ``run_trainer``, ``TrainerSpec``), ``actor`` (the Ray actor: ``train``,
``TrainerGroup``), ``distributed`` (data-parallel gradients), ``cli`` (``saintpipe serve trainer``).
Evaluation and inference: ``evaluate``, ``eval_watch``, ``inference`` (layer-wise full-graph inference)
and ``row_blocks`` (its Numba kernels). Test data: ``synthetic`` (the benchmarks are in
:mod:`saintpipe.bench`).
"""

from __future__ import annotations

from saintpipe.core.lazy import lazy_exports

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (saintpipe.core.lazy)
if TYPE_CHECKING:  # pragma: no cover
    from saintpipe.trainer.actor import TrainerGroup, train
    from saintpipe.trainer.run_dir.checkpoint import Checkpointer
    from saintpipe.trainer.config import ModelConfig, TrainerConfig
    from saintpipe.trainer.loop import TrainLoop, TrainResult
    from saintpipe.trainer.models import GNN, build_model

__all__ = [
    "GNN", "Checkpointer", "ModelConfig", "TrainLoop", "TrainResult", "TrainerConfig", "TrainerGroup",
    "build_model", "train",
]
__getattr__, __dir__ = lazy_exports(__name__)
