"""Data-parallel trainers: gradients averaged with torch.distributed (gloo on CPU, nccl on GPU).

Every step each trainer all-reduces one flat buffer: its gradients followed by the number of labelled nodes it
trained on, so all trainers apply the same averaged update *and* agree on how far the shared epoch has got.
Validation runs on rank 0 only; :meth:`DataParallel.decide` broadcasts its decision (stop or go on, the score)
to the others.
"""

from __future__ import annotations

import datetime
import logging
import socket

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (for the process group's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class DataParallel:
    """This process's membership in a group of ``world_size`` trainers.

    Args:
        rank, world_size: this trainer's index and the group size.
        master: ``host:port`` where rank 0 listens for the rendezvous.
        device: the trainer's device (picks the backend: nccl for CUDA, gloo otherwise).
        timeout_s: how long a collective may wait for the slowest trainer.
    """

    def __init__(
        self, rank: int, world_size: int, master: str, device: torch.device, timeout_s: float = 300.0
    ) -> None:
        self.rank, self.world_size, self.device = rank, world_size, device
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(
            backend,
            init_method=f"tcp://{master}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        log.info("trainer %d/%d joined the %s group at %s", rank, world_size, backend, master)

    def sync(self, grads: list[torch.Tensor], labelled: float) -> float:
        """Average ``grads`` in place across trainers; returns ``labelled`` summed across trainers."""
        flat = torch.cat(
            [g.reshape(-1) for g in grads]
            + [torch.tensor([labelled], device=grads[0].device, dtype=grads[0].dtype)]
        )
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        total = float(flat[-1])
        flat = flat[:-1] / self.world_size
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
        return total

    def check_same_start(self, steps: int) -> None:
        """Raise unless every trainer starts from the same step (they resumed from the same checkpoint).

        Raises:
            ConfigError: the trainers hold different checkpoints (``checkpoint_dir`` not shared).
        """
        from saintpipe.core.errors import ConfigError

        buf = torch.tensor([float(steps), -float(steps)], dtype=torch.float64, device=self.device)
        dist.all_reduce(buf, op=dist.ReduceOp.MAX)
        if buf[0] != -buf[1]:
            raise ConfigError(
                f"data-parallel trainers start from different steps ({int(-buf[1])}..{int(buf[0])}): "
                "their checkpoint_dir must be one shared directory"
            )

    def decide(self, values: list[float]) -> list[float]:
        """Rank 0's ``values`` on every rank."""
        buf = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.broadcast(buf, src=0)
        return buf.tolist()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
