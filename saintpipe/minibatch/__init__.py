"""The minibatch path: how a consumer's subgraphs and their features arrive, beneath the trainer and the loader.

* :mod:`~saintpipe.minibatch.feed`: :class:`PoolFeed` (a subgraph from the pool, its feature rows,
  prefetched on a thread), :class:`Item`, and :func:`take_back` (a restarted consumer's unacknowledged
  subgraphs, delivered again at once).
* :mod:`~saintpipe.minibatch.inputs`: :class:`PoolInputs`, a consumer's pool, feature client and feed,
  opened one way for trainers and users' loaders alike.
* :mod:`~saintpipe.minibatch.expand`: :class:`SubgraphExpander`, node sets from the pool (wire
  ``nodes``) induced again on the consumer's copy of the topology, by the sampler's own kernel.
* :mod:`~saintpipe.minibatch.batch`: :class:`Minibatch`, one subgraph as tensors with the GraphSAINT
  loss (what the users' loader yields), and :func:`build_minibatch`.

The models know nothing of this layer: the trainer's loop takes :class:`Item` s from any ``Feed``.
Importing this package loads nothing else: the names below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from saintpipe.core.lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover
    from saintpipe.minibatch.batch import Minibatch, build_minibatch
    from saintpipe.minibatch.expand import SubgraphExpander
    from saintpipe.minibatch.feed import Feed, Item, PoolFeed, take_back
    from saintpipe.minibatch.inputs import PoolInputs

__all__ = ["Feed", "Item", "Minibatch", "PoolFeed", "PoolInputs", "SubgraphExpander", "build_minibatch", "take_back"]
__getattr__, __dir__ = lazy_exports(__name__)
