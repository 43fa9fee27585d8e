"""The sampler service: pinned Ray actors that fill the pool with subgraphs (see docs/sampler-service.md)."""
