"""Numba kernels of the samplers: pure functions over contiguous arrays.

One module per job: ``rng`` (the random stream), ``select`` (the node-set
helpers every sampler shares), one module per node-selection kernel
(``frontier`` with ``dashboard``, ``random_walk``, ``edge``, ``node``, with
``alias`` tables), ``induce`` (clipping, induction into CSR, weights and the
Algorithm 6 transpose), and for dependent minibatches (``kappa > 1``)
``dependent`` (the slowly changing per-slot streams, each kernel's
``*_select_dependent``) with ``frontier_dependent`` (Algorithm 2 as racing
walkers).
"""
