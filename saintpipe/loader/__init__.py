"""``saintpipe.loader``: the pipeline's GraphSAINT minibatches for your own PyTorch or PyG training loop.

* :class:`SubgraphLoader` (:mod:`~saintpipe.loader.stream`): a torch ``IterableDataset`` of
  :class:`Minibatch` es, on a running pipeline (:meth:`SubgraphLoader.connect`) or on one it
  starts itself (:meth:`SubgraphLoader.embedded`, stopped by ``close()`` / its ``with`` block).
* :class:`Minibatch` (:mod:`~saintpipe.loader.minibatch`): features, edges, aggregator weights,
  labels, loss weights, global ids, training mask; ``loss(logits)`` is the GraphSAINT loss.
* :func:`to_pyg` (:mod:`~saintpipe.loader.pyg`): a minibatch as ``torch_geometric.data.Data``
  (the ``pyg`` extra).

docs/how-to/loader.md has the examples. Importing this package loads nothing else
(no torch, no Ray): the names below load on first use.

Example::

    from torch.utils.data import DataLoader
    from saintpipe.loader import SubgraphLoader

    with SubgraphLoader.embedded("data/demo", steps=200) as loader:
        for batch in DataLoader(loader, batch_size=None):
            ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from saintpipe.core.lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover
    from saintpipe.loader.address import PipelineAddress
    from saintpipe.loader.config import LoaderConfig
    from saintpipe.loader.embedded import EmbeddedPipeline
    from saintpipe.loader.minibatch import Minibatch
    from saintpipe.loader.pyg import to_pyg
    from saintpipe.loader.stream import SubgraphLoader

__all__ = ["EmbeddedPipeline", "LoaderConfig", "Minibatch", "PipelineAddress", "SubgraphLoader", "to_pyg"]
__getattr__, __dir__ = lazy_exports(__name__)
