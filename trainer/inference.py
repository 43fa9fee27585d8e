"""Layer-wise full-graph inference in bounded memory: logits and node embeddings of every node.

One layer at a time over all nodes: layer ℓ's output is computed in row blocks, each block aggregating its
rows' neighbours from layer ℓ-1's whole output (the features for the first layer) through the block's rows of
Ã = D⁻¹A (Â with self-loops for GCN, GAT, MixHop), the graph evaluation uses (no sampling, no sampling
normalization). Every neighbour of a block's rows is an input, so its rows are exact, and nothing beyond one
hop is ever read: no k-hop neighbourhood is induced. Two layouts of a block:

* sliced (the CPU; GCN, GraphSAGE, MixHop's hops): the block's CSR is a slice
  of the graph's over all N columns, and the product reads the neighbours'
  rows in place from the previous output (a memory map included);
* gathered (GAT, which scores every input row; a graph classifier, whose X·W would otherwise cover all N rows;
  any device other than the CPU): the block's own rows, then each other neighbour's once, are gathered
  (:func:`~saintpipe.trainer.row_blocks.row_block`) and only they travel.

MixHop's powers Â^k·X are hops of their own: each is a full pass over the row
blocks, then the layer combines them block by block.

Memory: a layer's input and output (N × width, float32 each; the features are copied into one array first when
a sliced layer reads them) and one block. An array larger than ``spill_bytes`` lives in a ``np.memmap`` in a
temporary directory (removed at the end); a block holds at most ``block_rows`` rows and about ``block_bytes``
of CSR, inputs and outputs. The layers' own code runs on each block (the same code as training and the
one-pass evaluation), so the results equal a full-graph forward pass up to float rounding.

Every pass over the row blocks reports to an optional
:class:`~saintpipe.trainer.eval_watch.EvalWatch` (which pass, how far), which
cuts the inference at a deadline; :meth:`LayerwiseInference.estimate_seconds`
times a few blocks of each pass to say beforehand about how long it takes.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import cast
from pathlib import Path

import numpy as np
import torch

from saintpipe.core.bars import ProgressBar
from saintpipe.trainer.batch import GraphBatch
from saintpipe.trainer.eval_watch import EvalWatch
from saintpipe.trainer.row_blocks import block_bounds, row_block
from saintpipe.trainer.layers import GATLayer, GraphLayer, MixHopLayer
from saintpipe.trainer.models import GNN
from saintpipe.trainer.ops import spmm
from saintpipe.trainer.schedule import Scheduler
from saintpipe.core.tensors import as_tensor
from saintpipe.trainer.sparse import SparseOperand

log = logging.getLogger(__name__)

Rows = Callable[[np.ndarray], np.ndarray]
"""Rows of a layer's input for an array of node ids, in order (features, or the previous layer's output)."""

STAND_IN_ROWS = 1 << 19
"""Rows of the stand-in input :meth:`LayerwiseInference.estimate_seconds` times in-place reads against: at a
width of 64, 128 MiB, past the last-level cache, so random reads of it miss as those of an N-row output do."""


@dataclass(frozen=True)
class InferenceLimits:
    """How much memory layer-wise inference may use.

    Attributes:
        block_rows: output rows per block at most.
        block_bytes: about the most one block holds: its sources' input rows, its CSR and its output rows.
        spill_bytes: a layer's full output (N × width × 4 bytes) above this goes to a memory-mapped file.
        tmpdir: where those files go (None: the system's temporary directory).
    """

    block_rows: int = 65_536
    block_bytes: int = 256 << 20
    spill_bytes: int = 1 << 30
    tmpdir: Path | None = None

    def __post_init__(self) -> None:
        if self.block_rows < 1 or self.block_bytes < 1 or self.spill_bytes < 0:
            raise ValueError(f"invalid inference limits: {self}")


class LayerwiseInference:
    """Full-graph outputs of ``model`` on ``graph``, one layer at a time.

    Args:
        model: the trained GNN (put in eval mode while it runs; its mode is restored).
        graph: a :class:`~saintpipe.trainer.evaluate.EvalGraph` (CSR, feature gather, degrees).
        limits: the memory bounds.
        device: where the blocks compute.
        progress: a progress bar per pass on stderr.
        watch: told of every pass and block; it may cut the inference (:class:`EvaluationCancelled`).

    Example:
        >>> logits = LayerwiseInference(model, graph).logits()          # doctest: +SKIP
        >>> hidden = LayerwiseInference(model, graph).embeddings()       # doctest: +SKIP
    """

    def __init__(self, model: GNN, graph, limits: InferenceLimits | None = None,
                 device: torch.device | str = "cpu", progress: bool = False, watch: EvalWatch | None = None) -> None:
        self.model, self.graph, self.watch = model, graph, watch
        self.limits = limits or InferenceLimits()
        self.device = torch.device(device)
        self.progress = progress
        self.indptr = np.asarray(graph.indptr)
        self.indices = np.asarray(graph.indices)
        self.degrees = np.asarray(graph.degrees, dtype=np.float32)
        self.inv_degree = np.divide(1.0, self.degrees, out=np.zeros_like(self.degrees), where=self.degrees > 0)
        self._scratch = np.full(graph.num_nodes, -1, dtype=np.int32)
        self._features_array: np.ndarray | None = None
        # On the CPU a block reads its neighbours' rows in place from the previous layer's whole output; a device
        # gets each block's rows gathered (only those travel), as GAT does everywhere (it scores every input row).
        self.sliced = self.device.type == "cpu"
        # A block's inputs outnumber its rows, often by far (all N rows, read in place): (A·X)·W touches an input
        # row once per entry, A·(X·W) would multiply every input row by W. The square-matrix cost model of the
        # scheduler cannot see that.
        self.scheduler = Scheduler("ax_first")

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.size - 1)

    # --- what callers ask for ----------------------------------------------------------------------------
    def embeddings(self, layer: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Output of graph layer ``layer`` (1-based, after the activation; default: the last) for every node.

        Args:
            out: a float32 [N, width] array to write into (e.g. ``np.lib.format.open_memmap`` of the output
                file, so the embeddings never sit in memory whole); None: a new array.
        """
        depth = len(self.model.layers)
        layer = depth if layer is None else layer
        if not 1 <= layer <= depth:
            raise ValueError(f"layer {layer}: the model has graph layers 1 to {depth}")
        with self._evaluating(), self._watching(layer, classifier=False), self._workdir() as tmp:
            h = self._layers(layer, tmp, out)
            # a memory map in tmp would vanish with it
            return np.array(h) if out is None and isinstance(h, np.memmap) else h

    def logits(self) -> np.ndarray:
        """The classifier's logits [N, C] of every node (before softmax/sigmoid)."""
        model = self.model
        with self._evaluating(), self._watching(len(model.layers), classifier=True), self._workdir() as tmp:
            h = self._layers(len(model.layers), tmp, None)
            out = np.empty((self.num_nodes, model.num_classes), dtype=np.float32)
            if model.config.classifier == "graph":  # Â·(H·W): one more aggregation, H·W on the gathered rows
                self._gathered("classifier", lambda ids: h[ids], h.shape[1], out,
                               lambda batch: model.classify(batch.x, batch))
            else:
                for start, stop in self._ranges(np.arange(0, self.num_nodes + 1, self.limits.block_rows),
                                                "classifier"):
                    x = torch.from_numpy(np.ascontiguousarray(h[start:stop])).to(self.device)
                    out[start:stop] = model.classify(x).cpu().numpy()
            return out

    def estimate_seconds(self, samples: int = 2, seed: int = 0) -> float:
        """About how long :meth:`logits` takes here, from a few timed row blocks of each pass.

        Each pass is timed the way it runs. Where the features are first copied into one array (the CPU's
        sliced layers, MixHop), one block of rows is gathered and scaled by N over its rows, and the layer's
        blocks read their neighbours in place from a stand-in of :data:`STAND_IN_ROWS` rows (column ids
        wrapped onto it). Where every block gathers its own inputs (GAT, a device), the first layer's blocks
        gather the real features. ``samples`` blocks per pass, spread over the rows, are timed and scaled by
        the pass's rows + CSR entries over theirs. It does not see the page cache of spilled layer outputs.
        """
        model, n = self.model, self.num_nodes
        if n == 0:
            return 0.0
        rng = np.random.default_rng(seed)
        width, total = self.graph.feature_dim, 0.0
        layers = cast(list[GraphLayer], list(model.layers))
        # No model.eval(): a training thread may be using the model meanwhile (dropout's cost only errs long).
        with torch.no_grad():
            for i, layer in enumerate(layers):
                gathered = isinstance(layer, GATLayer) or (not self.sliced and not isinstance(layer, MixHopLayer))
                if i == 0 and not gathered:  # the features copied into one array first: one block of that copy
                    t0 = time.perf_counter()
                    first = self.graph.gather(np.arange(min(n, self.limits.block_rows), dtype=np.int64))
                    total += (time.perf_counter() - t0) * n / max(1, first.shape[0])
                if gathered:
                    # every block gathers its sources' rows: the real features for the first layer
                    stand_in = rng.standard_normal((min(n, self.limits.block_rows), width), dtype=np.float32)
                    rows: Rows = (self.graph.gather if i == 0
                                  else (lambda ids, h=stand_in: h[ids % h.shape[0]]))  # type: ignore[misc]  # mypy cannot type a lambda with default arguments
                    source = (lambda start, stop, rows=rows: self._gather(start, stop, rows))
                else:
                    # blocks read their neighbours in place from the whole previous output: a stand-in larger
                    # than the caches, column ids wrapped onto it, so that the reads miss as theirs would
                    wrap = min(n, max(STAND_IN_ROWS, self.limits.block_rows))
                    x_stand = torch.from_numpy(rng.standard_normal((wrap, width), dtype=np.float32))
                    source = (lambda start, stop, x=x_stand, wrap=wrap:  # type: ignore[misc]  # mypy cannot type a lambda with default arguments
                              self._slice(start, stop, x, wrap=wrap))
                if isinstance(layer, MixHopLayer):  # a hop's cost, once per hop: the block's rows of Â times X
                    hop = self._timed_blocks(source, width, width, lambda batch: spmm(batch.adj_hat, batch.x),
                                             samples)
                    total += max(layer.powers) * hop
                else:
                    def compute(batch, layer=layer):
                        return model.act(layer(batch.x, batch, self.scheduler))
                    total += self._timed_blocks(source, width, layer.f_out, compute, samples,
                                                heads=getattr(layer, "heads", 0))
                width = layer.f_out
            stand_in = rng.standard_normal((min(n, self.limits.block_rows), width), dtype=np.float32)
            if model.config.classifier == "graph":
                total += self._timed_blocks(
                    lambda start, stop: self._gather(start, stop, lambda ids: stand_in[ids % stand_in.shape[0]]),
                    width, model.num_classes, lambda batch: model.classify(batch.x, batch), samples)
            else:
                t0 = time.perf_counter()
                model.classify(torch.from_numpy(stand_in).to(self.device)).cpu()
                total += (time.perf_counter() - t0) * n / stand_in.shape[0]
        return total

    def _timed_blocks(self, source: Callable[[int, int], GraphBatch], width_in: int, width_out: int,
                      compute: Callable[[GraphBatch], torch.Tensor], samples: int, heads: int = 0) -> float:
        """Seconds of one pass: ``samples`` blocks spread over the rows (each made by ``source(start, stop)``
        and computed), timed and scaled by the pass's rows + entries over theirs."""
        cuts = self._cuts(width_in, width_out, heads)
        cuts = np.append(cuts[cuts < self.num_nodes], self.num_nodes)
        picks = np.unique(np.linspace(0, cuts.size - 2, num=max(1, samples)).round().astype(np.int64))
        seconds = work = 0.0
        for b in picks.tolist():
            start, stop = int(cuts[b]), int(cuts[b + 1])
            t0 = time.perf_counter()
            compute(source(start, stop)).cpu()
            seconds += time.perf_counter() - t0
            work += (stop - start) + float(self.indptr[stop] - self.indptr[start])
        return seconds * (self.num_nodes + self.indices.size) / max(1.0, work)

    # --- passes ------------------------------------------------------------------------------------------
    @contextmanager
    def _watching(self, upto: int, classifier: bool) -> Iterator[None]:
        """Tell the watch how many passes over the rows are coming (each :meth:`_ranges` loop is one), and
        whether they all ran."""
        if self.watch is None:
            yield
            return
        layers = list(self.model.layers)[:upto]
        first = layers[0] if layers else None
        materialized = isinstance(first, MixHopLayer) or (self.sliced and first is not None
                                                           and not isinstance(first, GATLayer))
        passes = int(materialized) + int(classifier)
        passes += sum(max(layer.powers) + 1 if isinstance(layer, MixHopLayer) else 1 for layer in layers)
        completed = False
        self.watch.begin(passes)
        try:
            yield
            completed = True
        finally:
            self.watch.end(completed)

    def _layers(self, upto: int, tmp: Path, last_out: np.ndarray | None) -> np.ndarray:
        model = self.model
        previous: np.ndarray | None = None  # the previous layer's output; None: the input features
        width = self.graph.feature_dim
        for i, layer in enumerate(cast(list[GraphLayer], list(model.layers))[:upto]):
            out = last_out if i == upto - 1 and last_out is not None else self._array(tmp, layer.name, layer.f_out)
            if out.shape != (self.num_nodes, layer.f_out):
                raise ValueError(f"output array of shape {out.shape}, expected {(self.num_nodes, layer.f_out)}")
            compute = (lambda batch, layer=layer: model.act(layer(batch.x, batch, self.scheduler)))
            if isinstance(layer, MixHopLayer):
                self._mixhop(layer, self._materialized(tmp) if previous is None else previous, out, tmp)
            elif isinstance(layer, GATLayer) or not self.sliced:
                rows: Rows = self.graph.gather if previous is None else (lambda ids, h=previous: h[ids])  # type: ignore[misc]  # mypy cannot type a lambda with default arguments
                self._gathered(layer.name, rows, width, out, compute, heads=getattr(layer, "heads", 0))
            else:
                self._sliced(layer.name, self._materialized(tmp) if previous is None else previous, out, compute)
            _release(previous if previous is not None else self._features_array)
            self._features_array = None
            previous, width = out, layer.f_out
            log.debug("layer-wise inference: %s done", layer.name)
        return cast(np.ndarray, previous)  # upto >= 1: a model has at least one layer

    def _sliced(self, name: str, x: np.ndarray, out: np.ndarray,
                compute: Callable[[GraphBatch], torch.Tensor]) -> None:
        """``out[block] = compute(block)`` over row blocks that read their neighbours straight from ``x``, the
        previous layer's whole output (or a memory map of it): the block's CSR is a slice of the graph's."""
        x_all = torch.from_numpy(x)  # no copy, a memory map included: the product reads the rows it needs
        for start, stop in self._ranges(self._cuts(x.shape[1], out.shape[1]), name):
            out[start:stop] = compute(self._slice(start, stop, x_all)).numpy()

    def _gathered(self, name: str, rows: Rows, width: int, out: np.ndarray,
                  compute: Callable[[GraphBatch], torch.Tensor], heads: int = 0) -> None:
        """``out[block] = compute(block)`` over row blocks whose inputs are gathered: the block's own rows, then
        each other neighbour's once (GAT scores every input row; a device other than the CPU gets only these)."""
        for start, stop in self._ranges(self._cuts(width, out.shape[1], heads), name):
            out[start:stop] = compute(self._gather(start, stop, rows)).cpu().numpy()

    def _mixhop(self, layer: MixHopLayer, x: np.ndarray, out: np.ndarray, tmp: Path) -> None:
        """Â^k·X for k up to the largest power, one full hop at a time, then the layer per row block."""
        hops = [x]
        for k in range(1, max(layer.powers) + 1):
            hop = self._array(tmp, f"{layer.name}-hop{k}", x.shape[1])
            name = f"{layer.name} hop {k}"
            propagate = (lambda batch: spmm(batch.adj_hat, batch.x))
            if self.sliced:
                self._sliced(name, hops[-1], hop, propagate)
            else:
                self._gathered(name, lambda ids, h=hops[-1]: h[ids], x.shape[1], hop, propagate)  # type: ignore[misc]  # mypy cannot type a lambda with default arguments
            hops.append(hop)
        for start, stop in self._ranges(np.arange(0, self.num_nodes + 1, self.limits.block_rows),
                                        f"{layer.name} combine"):
            parts = [as_tensor(hops[p][start:stop], np.float32).to(self.device) for p in layer.powers]
            out[start:stop] = self.model.act(layer.combine(parts)).cpu().numpy()
        for hop in hops[1:]:
            _release(hop)

    # --- pieces -----------------------------------------------------------------------------------------
    def _materialized(self, tmp: Path) -> np.ndarray:
        """The input features as one [N, F] float32 array (a memory map when large), copied in row ranges."""
        if self._features_array is None:
            feats = self._array(tmp, "features", self.graph.feature_dim)
            for start, stop in self._ranges(np.arange(0, self.num_nodes + 1, self.limits.block_rows), "features"):
                feats[start:stop] = self.graph.gather(np.arange(start, stop, dtype=np.int64))
            self._features_array = feats
        return self._features_array

    def _cuts(self, width_in: int, width_out: int, heads: int = 0) -> np.ndarray:
        # Per row or entry of a block: an input row (gathered sources are at most rows + entries), an output
        # row, the CSR entry, and the attention weights of each head.
        per_unit = 4 * (width_in + width_out) + 12 + 16 * heads
        return block_bounds(self.indptr, self.limits.block_rows, max(1, self.limits.block_bytes // per_unit))

    def _slice(self, start: int, stop: int, x_all: torch.Tensor, wrap: int = 0) -> GraphBatch:
        """Rows [start, stop) over all N columns, Ã = D⁻¹A and Â = (I+D)⁻¹(I+A) with the full graph's degrees.

        ``wrap``: over ``wrap`` stand-in columns instead (column ids modulo ``wrap``, the block's own rows
        first), for timing a block against a stand-in input smaller than N rows.
        """
        a, b = int(self.indptr[start]), int(self.indptr[stop])
        crow = self.indptr[start : stop + 1] - a
        counts = np.diff(crow)
        col = self.indices[a:b] if not wrap else (self.indices[a:b] % wrap).astype(np.int32)
        w = np.repeat(self.inv_degree[start:stop], counts)
        n_all = self.num_nodes if not wrap else wrap
        adj = SparseOperand.from_csr(crow, col, w, w, cols=n_all, first=start if not wrap else 0)
        # What with_self_loops makes of D⁻¹A: (d/(1+d))·(1/d) = 1/(1+d) per entry of row v, and 1/(1+d) on the
        # diagonal; computed for the block's rows only (with_self_loops would mix all N degrees per block).
        self_weight = np.float32(1.0) / (np.float32(1.0) + self.degrees[start:stop])
        hat_w = torch.from_numpy(np.repeat(self_weight, counts))
        adj_hat = adj.with_weights(hat_w, hat_w, torch.from_numpy(self_weight))
        return GraphBatch(adj=adj, x=x_all, labels=torch.zeros(0), loss_weights=torch.zeros(0),
                          degrees=torch.from_numpy(self.degrees[start:stop]), _adj_hat=adj_hat)

    def _gather(self, start: int, stop: int, rows: Rows) -> GraphBatch:
        """Rows [start, stop) as a batch over their sources: Ã = D⁻¹A with the full graph's degrees."""
        sources, block_indptr, block_indices = row_block(self.indptr, self.indices, start, stop, self._scratch)
        n = stop - start
        w = np.repeat(self.inv_degree[start:stop], np.diff(block_indptr))
        # w twice: Aᵀ's weights serve backward passes only, and a row block has none
        adj = SparseOperand.from_csr(block_indptr, block_indices, w, w, device=self.device, cols=sources.size)
        return GraphBatch(
            adj=adj,
            x=as_tensor(rows(sources), np.float32).to(self.device),
            labels=torch.zeros(0),
            loss_weights=torch.zeros(0),
            degrees=torch.from_numpy(self.degrees[sources]).to(self.device),
            node_ids=sources[:n],
        )

    def _ranges(self, cuts: np.ndarray, name: str = "") -> Iterator[tuple[int, int]]:
        cuts = np.append(cuts[cuts < self.num_nodes], self.num_nodes)
        bar = ProgressBar(total=self.num_nodes, desc=f"inference {name}".rstrip(), unit="node",
                          disable=not self.progress, leave=False)
        watch, n = self.watch, max(1, self.num_nodes)
        if watch is not None:
            watch.next_pass(name)
        try:
            for start, stop in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
                yield start, stop
                bar.update(stop - start)
                if watch is not None:
                    watch.advance(stop / n)  # raises EvaluationCancelled past its deadline
        finally:
            bar.close()

    def _array(self, tmp: Path, name: str, width: int) -> np.ndarray:
        shape = (self.num_nodes, width)
        if self.num_nodes * width * 4 <= self.limits.spill_bytes:
            return np.empty(shape, dtype=np.float32)
        return np.lib.format.open_memmap(tmp / f"{name}.npy", mode="w+", dtype=np.float32, shape=shape)

    @contextmanager
    def _workdir(self) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="saintpipe-inference-", dir=self.limits.tmpdir) as tmp:
            yield Path(tmp)

    @contextmanager
    def _evaluating(self) -> Iterator[None]:
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                yield
        finally:
            self.model.train(was_training)


def _release(array: np.ndarray | None) -> None:
    """Unlink a spilled layer output's file once the next layer has read it: its disk space comes back when
    the last mapping goes (the temporary directory would only go at the end)."""
    if isinstance(array, np.memmap) and array.filename:
        Path(array.filename).unlink(missing_ok=True)
