"""GraphSAINT samplers: Numba kernels, induction into CSR, normalization (see docs/sampler.md)."""
