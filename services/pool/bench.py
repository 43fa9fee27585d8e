"""``saintpipe bench pool``: put+get+ack throughput of the pool vs plain Redis SET+GET of the same bytes."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.cli.report import add_json_flag

    parser = sub.add_parser(
        "pool",
        help="subgraph pool throughput vs plain Redis SET+GET",
        description="Times put+get+ack of subgraphs through the pool (encode and decode included) and, "
        "in the same run, plain Redis SET+GET of the same message bytes as the baseline. Starts a "
        "private redis-server unless --redis-url or SAINTPIPE_REDIS_URL is given.",
    )
    parser.add_argument("--nodes", type=int, default=8000, help="nodes per subgraph (default 8000)")
    parser.add_argument(
        "--edges", type=int, default=60000, help="about this many CSR entries (default 60000)"
    )
    parser.add_argument(
        "--count",
        type=int,
        default=200,
        help="timed cycles of each path, interleaved so machine noise hits both alike (default 200)",
    )
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of a private one")
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    import os
    import statistics
    import time

    from saintpipe.cli.report import emit_report
    from saintpipe.errors import InvalidArgument
    from services.pool.codec import decode_subgraph, encode_subgraph
    from services.pool.connection import make_client
    from services.pool.pool import SubgraphPool
    from services.pool.redis_server import RedisServer
    from services.pool.synthetic import random_subgraph

    for name in ("nodes", "edges", "count"):
        if getattr(args, name) < 1:
            raise InvalidArgument(f"--{name} must be >= 1")
    sg = random_subgraph(args.nodes, args.edges, seed=0, job_id="bench")
    data = encode_subgraph(sg)
    job = f"bench-{os.getpid()}"
    warmup = 5

    with RedisServer(args.redis_url) as server, SubgraphPool(server.url, job, capacity=16) as pool:
        client = make_client(server.url)  # the pool's own connection settings: only the pool's work differs
        default_client = server.client()
        key = f"saintpipe:bench:{{{job}}}:baseline"

        def pool_cycle() -> None:
            pool.put(sg)
            entry = pool.get("bench", timeout=10)
            pool.ack(entry.entry_id)

        def baseline_cycle() -> None:
            client.set(key, data)
            if len(client.get(key)) != len(data):
                raise RuntimeError("baseline GET returned other bytes")

        def default_cycle() -> None:
            default_client.set(key, data)
            default_client.get(key)

        def codec_cycle() -> None:
            decode_subgraph(encode_subgraph(sg))

        cycles = {
            "pool": pool_cycle,
            "baseline": baseline_cycle,
            "default": default_cycle,
            "codec": codec_cycle,
        }
        seconds: dict[str, list[float]] = {name: [] for name in cycles}
        try:
            for i in range(warmup + args.count):  # interleaved: one cycle of each path per round
                for name, cycle in cycles.items():
                    start = time.perf_counter()
                    cycle()
                    if i >= warmup:
                        seconds[name].append(time.perf_counter() - start)
            stats = pool.stats()
            redis_version = client.info("server").get("redis_version", "?")
        finally:
            client.delete(key)
            pool.delete_job()
            client.close()
            default_client.close()
    if stats.acknowledged != warmup + args.count or stats.held != 0:
        raise RuntimeError(f"pool lost or kept entries during the benchmark: {stats}")

    mb = len(data) / 1e6
    labels = {
        "pool": "pool put+get+ack (with encode+decode)",
        "baseline": "redis SET+GET (same bytes, same client)",
        "default": "redis SET+GET (default redis-py client)",
        "codec": "encode+decode only (no Redis)",
    }
    rows = []
    for name, label in labels.items():
        median = statistics.median(seconds[name])
        rows.append(
            {
                "path": label,
                "subgraphs_per_s": 1 / median,
                "MB_per_s": mb / median,
                "median_ms": median * 1e3,
                "mean_ms": statistics.fmean(seconds[name]) * 1e3,
            }
        )
    ratio = rows[0]["subgraphs_per_s"] / rows[1]["subgraphs_per_s"]
    emit_report(
        "pool",
        rows,
        params={
            "nodes": sg.num_nodes,
            "edges": sg.num_edges,
            "message_bytes": len(data),
            "count": args.count,
            "redis": "external" if server.external else "private",
            "redis_version": redis_version,
        },
        summary={"ratio_pool_to_baseline": ratio, "target_ratio": 0.7, "meets_target": ratio >= 0.7},
        as_json=args.json,
    )
    return 0
