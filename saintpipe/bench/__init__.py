"""``saintpipe bench``: the benchmarks, one module each, named for what it measures.

``kernels`` (the sampler kernels), ``sampler_service`` (the sampler service
filling the pool, and the two wire forms' costs), ``pool``, ``features`` (the
feature service), ``train`` (the trainer's iteration, with ``train_core``),
``inference``, ``accuracy`` (a sub-package: the accuracy experiment),
``generate`` and ``dataset_import`` (the dataset tools) and ``loader``. Each
defines ``register(subparsers)`` and imports nothing heavy at module level;
:mod:`saintpipe.cli.bench` lists them.
"""
