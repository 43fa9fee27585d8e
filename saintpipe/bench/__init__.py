"""``saintpipe bench``: the benchmarks, one module each, named for what it measures.

Each defines ``register(subparsers)`` and imports nothing heavy at module level; :mod:`saintpipe.cli.bench`
lists them.
"""
