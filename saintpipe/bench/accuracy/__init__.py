"""``saintpipe bench accuracy``: each GraphSAINT sampler's test accuracy against full-batch GCN.

``cli`` registers the command; ``settings`` holds its samplers, parameters and normalizations (no torch, so
``--help`` stays fast); ``experiment`` trains and compares; ``full_batch`` is Kipf and Welling's full-batch
GCN recipe and ``local_pool`` the in-process subgraph pool the subgraph runs draw from.
"""
