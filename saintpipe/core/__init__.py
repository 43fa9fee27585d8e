"""The bottom layer: configuration, errors, the subgraph type, the protobuf wire reader, figure reporting
and small OS helpers.

Everything else in saintpipe may import from here; nothing here imports from
``saintpipe.services``, ``saintpipe.trainer`` or ``saintpipe.cli``.
"""
