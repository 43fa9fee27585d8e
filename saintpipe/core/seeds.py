"""The range of a random seed: one limit for every seed a user gives, one for the seeds derived from it.

A seed given by a user (``--seed``, ``[samplers] seed``, ``[trainer] seed``, the dataset generators'
``seed=``) is an integer from 0 to :data:`SEED_MAX` = 2**63 - 1: numpy refuses negative seeds, and a TOML
config file's integers are signed 64-bit, so 2**63 - 1 is the largest seed every way of giving one can hold
(it also fits the int64 of JSON readers, Redis and torch). numpy's ``default_rng`` and ``SeedSequence`` and
torch's ``manual_seed`` take all of them.

The seed of one subgraph is *derived* from the job's seed
(:func:`saintpipe.services.sampler.parallel.subgraph_seed`: a ``SeedSequence``
word, uint64), so it ranges over all 64 bits, up to :data:`DERIVED_SEED_MAX`; the
samplers' kernels take it as ``np.uint64`` and the pool stores it as a uint64.
"""

from __future__ import annotations

from typing import Annotated

import pydantic

SEED_MAX = 2**63 - 1
DERIVED_SEED_MAX = 2**64 - 1

# A config model's seed field: ``seed: Seed = 0`` (add a description with ``pydantic.Field``).
Seed = Annotated[int, pydantic.Field(ge=0, le=SEED_MAX)]
