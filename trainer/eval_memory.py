"""How much memory full-graph evaluation holds, and the warning a run prints before training when that
outgrows the machine: arithmetic on the model's widths only, so a run's driver asks without loading torch."""

from __future__ import annotations


def layerwise_peak_bytes(num_nodes: int, feature_dim: int, model_config) -> int:
    """The arrays layer-wise inference holds at once, over all nodes: a layer's input and output (the features
    copied into one array for the first layer; a MixHop layer's hops too), float32. Past half of
    ``eval_full_graph_max_bytes`` they are memory-mapped files, which the page cache must hold to stay fast."""
    widths = [feature_dim, *model_config.hidden]
    hops = 1 + (max(model_config.mixhop_powers) if model_config.arch == "mixhop" else 0)
    return 4 * num_nodes * max(hops * widths[i] + widths[i + 1] for i in range(len(widths) - 1))


def spill_warning(num_nodes: int, feature_dim: int, model_config, available: int) -> str | None:
    """A line for the user when layer-wise evaluation's arrays outgrow the memory ``available`` (they would be
    read from disk at random, every layer), else None."""
    from saintpipe.core.memory import format_bytes

    need = layerwise_peak_bytes(num_nodes, feature_dim, model_config)
    if need <= available:
        return None
    per_unit = 4 * num_nodes
    return (f"full-graph evaluation will hold {format_bytes(need)} of layer outputs ({num_nodes:,} nodes x the "
            f"widths of [trainer.model] hidden {list(model_config.hidden)}, float32) in memory-mapped files, more "
            f"than the {format_bytes(available)} of memory available: it will read them from disk and be slow; "
            f"each unit of hidden width costs {format_bytes(per_unit)} per layer, so a smaller hidden keeps it in "
            f"memory")
