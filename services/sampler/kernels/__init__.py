"""Numba kernels of the samplers: pure functions over contiguous arrays.

One module per job: ``rng`` (the random stream), ``select`` (the node-set
helpers every sampler shares), one module per node-selection kernel
(``frontier`` with ``dashboard``, ``random_walk``, ``edge``, ``node``, with
``alias`` tables) and ``induce`` (clipping, induction into CSR, weights and the
Algorithm 6 transpose).
"""
