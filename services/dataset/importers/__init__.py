"""The importers: other formats into the dataset store (``saintpipe data import``; docs/get-started/own-graph/).

One module per format: ``arrays`` (raw ``.npy`` files), ``npz`` (the shipped Planetoid graphs),
``graphsaint`` (GraphSAINT's format, its training graph kept), ``ogb`` (OGB's raw node property
layout), ``edgelist`` (a text edge list with arbitrary ids and side files), ``pyg`` (a
``torch_geometric.data.Data`` in memory); ``detect`` says which one reads a path. What they share:
``input_files`` (checks before reading), ``coerce`` (safe dtype conversion, errors naming the file),
``csv_tables`` (chunked numeric CSV, gzip too), ``tabular`` (delimited text tables), ``edge_stream``
(an edge list to a CSR in bounded memory), ``id_map`` (original ids <-> dense ids) and
``sidefiles`` (features, labels and splits keyed by the edge list's ids). Each writes through
:func:`saintpipe.services.dataset.store.write_dataset`.
"""
