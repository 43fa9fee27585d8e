"""Two real processes in a gloo group on loopback: gradients averaged, counts summed, decisions shared."""

from __future__ import annotations

import multiprocessing as mp

import torch


def _rank(rank: int, master: str, out) -> None:
    from saintpipe.core.errors import ConfigError
    from saintpipe.trainer.distributed import DataParallel

    group = DataParallel(rank, 2, master, torch.device("cpu"), timeout_s=60)
    grads = [torch.full((3,), float(rank + 1)), torch.full((2, 2), 10.0 * (rank + 1))]
    total = group.sync(grads, labelled=5.0 + rank)
    decided = group.decide([1.0, 0.25] if rank == 0 else [0.0, 0.0])
    group.check_same_start(7)  # same step everywhere: fine
    try:
        group.check_same_start(rank)  # a trainer that resumed from another checkpoint
        mismatch = ""
    except ConfigError as exc:
        mismatch = str(exc)
    out.put((rank, [g.tolist() for g in grads], total, decided, mismatch))
    group.close()


def test_gloo_group_averages_gradients_and_sums_labelled_nodes():
    from saintpipe.trainer.distributed import free_port

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    master = f"127.0.0.1:{free_port()}"
    procs = [ctx.Process(target=_rank, args=(r, master, out)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    for rank, grads, total, decided, mismatch in results:
        assert grads == [[1.5, 1.5, 1.5], [[15.0, 15.0], [15.0, 15.0]]]
        assert total == 11.0
        assert decided == [1.0, 0.25]  # rank 0's decision everywhere
        assert "start from different steps (0..1)" in mismatch and "shared directory" in mismatch
