"""The trainer: GNN models with the scheduled matmul order, the loop and its Ray actors
(docs/explanation/trainer.md, which also lists its modules).

The public names import from the package; they load on first use, so importing the package loads
neither torch nor Ray::

    from saintpipe.trainer import TrainerConfig, ModelConfig, TrainLoop
"""

from __future__ import annotations

from saintpipe.core.lazy import lazy_exports

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (saintpipe.core.lazy)
if TYPE_CHECKING:  # pragma: no cover
    from saintpipe.trainer.actor import TrainerGroup, train
    from saintpipe.trainer.run_dir.checkpoint import Checkpointer
    from saintpipe.trainer.config import ModelConfig, TrainerConfig
    from saintpipe.trainer.loop import TrainLoop
    from saintpipe.trainer.result import TrainResult
    from saintpipe.trainer.models import GNN, build_model

__all__ = [
    "GNN",
    "Checkpointer",
    "ModelConfig",
    "TrainLoop",
    "TrainResult",
    "TrainerConfig",
    "TrainerGroup",
    "build_model",
    "train"
]
__getattr__, __dir__ = lazy_exports(__name__)
