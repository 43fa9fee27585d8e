"""The subgraph pool: protobuf codec, Redis-stream pool, and the RedisServer helper (see docs/pool.md)."""
