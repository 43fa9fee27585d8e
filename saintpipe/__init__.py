"""saintpipe: GraphSAINT-style GNN training as a pipeline of services.

The command-line entry point lives in :mod:`saintpipe.cli`; the generated
protobuf modules in :mod:`saintpipe.protos`. The components themselves live in
the top-level ``services`` and ``trainer`` packages.
"""

__version__ = "0.1.0"
