"""saintpipe: GraphSAINT-style GNN training as a pipeline of services.

Everything installs under this one name. The folders follow the product's
layout (pyproject.toml maps them): ``saintpipe.core`` (configuration, errors,
the subgraph type, figure reporting), ``saintpipe.protos`` (generated
protobuf modules), ``saintpipe.services`` (the top-level ``services/`` folder:
dataset store, sampler kernels, pool, feature shards, sampler service,
pipeline), ``saintpipe.trainer`` (the top-level ``trainer/`` folder) and
``saintpipe.cli`` (the command line). docs/explanation/architecture.md draws the layers.
"""

__version__ = "0.1.0"
