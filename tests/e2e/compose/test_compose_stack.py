"""`docker compose up` under a real Docker Engine: a finished training run, faults, Ray across containers.

scripts/compose-test.sh runs this (it starts the engine and builds the
images). One scenario, on the compose file users run with the test override
over it (which only swaps images and leaves Grafana out):

1. up: every health check passes, training starts (seconds from `up` to the
   first step are reported);
2. Prometheus (through its HTTP API): every scrape target is up, every
   query of every dashboard panel returns data, and every alert of
   deploy/prometheus/alerts.yml is loaded and evaluates without error;
3. no secret (Redis password, Ray token) is in any process's argv, in any
   container;
4. Ray across containers: the supervisor reports sampler actors on both
   sampler nodes; the sampler-node container is killed and stays down (as a
   lost host does): its actors come back on the other node, and training
   goes on;
5. the samplers container, then the trainer container, is killed (SIGKILL
   to its main process from the host, as a crash or the OOM killer would):
   the restart policy brings each back, the samplers refill the pool, the
   trainer resumes from its checkpoint (not step 0); then `docker restart`
   of Redis; then `docker kill` of the trainer, which the engine counts as a
   manual stop (no restart policy applies), and `docker compose up -d`
   brings it back, resuming again;
6. the run completes: the trainer exits 0 and reports its test accuracy;
   the pool's account shows no subgraph acknowledged twice
   (produced = acknowledged + waiting + pending + dead-lettered);
   then a sweep runs against the stack (`--profile sweep run --rm sweep`, two
   short trials): the finished trainer's full default group makes way for the
   trials' groups, both trials score, each group's account adds up, and the
   job is left on its default group alone, which a trainer can read again;
7. `down` keeps the model and checkpoints (and the prepared dataset, which a
   new `up` reuses instead of regenerating); `down -v` leaves no container,
   network or volume.

The figures go to $SAINTPIPE_COMPOSE_REPORT, which the script prints last.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.support.cli import free_port
from tests.support.docker_stack import ComposeStack, StackError, docker, last_match
from tests.support.prometheus import dashboard_queries

ROOT = Path(__file__).resolve().parents[3]
OVERRIDE = Path(__file__).with_name("compose.test.yml")
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
JOB = "compose-test"
WORKERS = 2
# About 1,400 optimizer steps (three minutes undisturbed on two cores): every fault below lands mid-run (they
# are all done by about step 500 on two cores: the trainer waits through its own restarts). Early stopping off,
# so the run cannot end before them.
EPOCHS = 350
STEP = re.compile(r"epoch (\d+) step (\d+) val")

pytestmark = [pytest.mark.compose, pytest.mark.timeout(1500)]


class Report:
    """The figures, appended to the script's report file as they are measured."""

    def __init__(self) -> None:
        self.path = Path(os.environ.get("SAINTPIPE_COMPOSE_REPORT", "/dev/null"))

    def add(self, line: str) -> None:
        print(line, flush=True)
        with self.path.open("a") as fh:
            fh.write(line + "\n")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    work = tmp_path_factory.mktemp("compose")
    env = {
        "REDIS_PASSWORD": secrets.token_hex(16),
        "RAY_AUTH_TOKEN": secrets.token_hex(24),
        "GRAFANA_ADMIN_PASSWORD": secrets.token_hex(8),
        "SAINTPIPE_IMAGE": os.environ.get("SAINTPIPE_COMPOSE_IMAGE", "saintpipe-test/saintpipe:latest"),
        "DEMO_NODES": "30000",
        "SAMPLER_WORKERS": str(WORKERS),
        "JOB": JOB,
        "EPOCHS": str(EPOCHS),
        "PATIENCE": "0",
        "PROMETHEUS_PORT": str(free_port()),
    }
    env_file = work / "compose.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    project = f"sptest{os.getpid()}"
    s = ComposeStack(os.environ.get("SAINTPIPE_COMPOSE_BIN", "docker-compose"), [ROOT / "docker-compose.yml", OVERRIDE],
                     env_file, project)
    s.env = env
    try:
        yield s
    finally:
        left = s.left_behind()
        if any(left.values()):
            s.compose("down", "-v", "--timeout", "5", check=False)


def _prometheus(stack: ComposeStack, path: str, **params: str) -> dict:
    url = f"http://127.0.0.1:{stack.env['PROMETHEUS_PORT']}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as reply:
        body = json.loads(reply.read())
    assert body["status"] == "success", body
    return body["data"]


def _trainer_step(stack: ComposeStack) -> int:
    found = last_match(STEP.pattern, stack.logs("trainer"))
    return int(found.group(2)) if found else 0


def _wait_steps_beyond(stack: ComposeStack, step: int, what: str, timeout: float = 240) -> int:
    return stack.wait_for(f"training to go on past step {step} ({what})",
                          lambda: (s := _trainer_step(stack)) > step and s, timeout, "trainer")


def _placements(stack: ComposeStack) -> list[str]:
    return re.findall(r"sampler placement: (.*)", stack.logs("samplers"))


def _pool_stats(stack: ComposeStack) -> dict:
    code = ("import dataclasses, json, os; from saintpipe.services.pool.pool import SubgraphPool; "
            f"p = SubgraphPool(os.environ['SAINTPIPE_REDIS_URL'], {JOB!r}); "
            "print(json.dumps(dataclasses.asdict(p.stats())))")
    return json.loads(stack.exec("samplers", "python", "-c", code).strip().splitlines()[-1])


def _resumes(stack: ComposeStack) -> int:
    return len(re.findall(r"resumed from step \d+", stack.logs("trainer")))


def _wait_resumed(stack: ComposeStack, resumes_before: int) -> int:
    """The step of the trainer's next resume (after ``resumes_before`` earlier ones)."""
    def resumed() -> int | None:
        found = re.findall(r"resumed from step (\d+)", stack.logs("trainer"))
        return int(found[-1]) if len(found) > resumes_before else None

    return stack.wait_for("the trainer to resume from its checkpoint", resumed, 240, "trainer")


def _assert_resumed_near(resumed: int, killed_at: int) -> None:
    """Resumed from a checkpoint of the killed run, not from step 0: checkpoints come every epoch end (a few
    steps here) and every 50 steps, so at most one interval is lost; a 50-step checkpoint may follow the last
    logged epoch end by a few steps."""
    assert killed_at - 60 <= resumed <= killed_at + 10 and resumed > 0, (resumed, killed_at)


def _summary(log: str) -> dict[str, str]:
    """The trainer's last printed summary (``key  value`` lines)."""
    start = log.rfind("test_score ")
    assert start >= 0, f"the trainer printed no summary:\n{log[-3000:]}"
    out = {}
    for line in log[start:].splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and re.fullmatch(r"[a-z_]+", parts[0]):
            out[parts[0]] = parts[1].strip()
    return out


def test_compose_stack_trains_to_the_end_through_faults(stack):
    report = Report()

    # 1. up, health checks, first training step.
    t_up = time.monotonic()
    stack.compose("up", "--detach", "--no-build", "--pull", "never", timeout=600)
    stack.wait_healthy(stack.services_with_healthcheck(), timeout=300)
    first = stack.wait_for("the trainer's first step",
                           lambda: re.search(r"first step done", stack.logs("trainer")), 300, "trainer")
    assert first
    report.add(f"seconds from `up` to the first training step: {time.monotonic() - t_up:.1f}")
    prepared = stack.logs("prepare-data")
    assert "wrote /data/demo" in prepared, prepared

    # 2. Prometheus: every target up, every dashboard query answered with data.
    def targets_up() -> list[dict] | None:
        active = _prometheus(stack, "/api/v1/targets")["activeTargets"]
        return active if active and all(t["health"] == "up" for t in active) else None

    try:
        active = stack.wait_for("every Prometheus target up", targets_up, 120, interval=3)
    except StackError:
        active = _prometheus(stack, "/api/v1/targets")["activeTargets"]
        pytest.fail("targets not up: " + "; ".join(f"{t['scrapeUrl']} {t['health']} {t['lastError']}"
                                                    for t in active if t["health"] != "up"))
    queries = dashboard_queries()

    def panels_without_data() -> list[str]:
        return [name for name, expr in queries if not _prometheus(stack, "/api/v1/query", query=expr)["result"]]

    missing: list[str] = []

    def all_panels() -> bool:
        missing[:] = panels_without_data()
        return not missing

    try:
        stack.wait_for("data for every dashboard panel", all_panels, 150, interval=5)
    except StackError:
        pytest.fail(f"dashboard queries without data: {missing}")
    report.add(f"Prometheus: {len(active)} scrape targets up; {len(queries)} dashboard queries "
               f"({len({q[0].split(' [')[0] for q in queries})} panels) return data")

    # Every alert of alerts.yml loaded (rule_files, the compose mount) and evaluated without error ("ok";
    # "unknown" until its group's first evaluation). Whether one fires is not asserted: the faults below may.
    alerts = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"] if "alert" in r}
    health: dict[str, str] = {}

    def alerts_ok() -> bool:
        groups = _prometheus(stack, "/api/v1/rules", type="alert")["groups"]
        health.clear()
        health.update({r["name"]: r["health"] for g in groups for r in g["rules"]})
        return bool(alerts) and all(health.get(name) == "ok" for name in alerts)

    try:
        stack.wait_for("every alert rule loaded and evaluated", alerts_ok, 90, interval=3)
    except StackError:
        pytest.fail(f"alert rules not all healthy: expected {sorted(alerts)}, Prometheus has {health}")
    report.add(f"Prometheus: {len(alerts)} alert rules loaded and healthy")

    # 3. No secret in any process's argv, in any container.
    secret_values = [stack.env["REDIS_PASSWORD"], stack.env["RAY_AUTH_TOKEN"]]
    running = docker("ps", "-q", "--filter", f"label=com.docker.compose.project={stack.project}").split()
    for cid in running:
        argv = docker("exec", cid, "sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '",
                      check=False)
        assert argv, f"could not read the processes of container {cid}"
        leaked = [v[:4] + "…" for v in secret_values if v in argv]
        assert not leaked, f"container {cid}: a secret is in a process's argv"
    report.add(f"secrets in argv: none, in {len(running)} containers")

    # The feature shards speak TLS only, and every call must carry the token: from the trainer's container, a
    # plaintext probe fails, a TLS one passes, and an Info call over TLS without the token is UNAUTHENTICATED.
    probe = ["python", "-m", "saintpipe.cli.health_probe", "--timeout", "5", "grpc", "feature-shard-1:50051"]
    assert "SERVING" in stack.exec("trainer", *probe, "--tls-ca", "/certs/ca.crt")
    with pytest.raises(StackError, match="exited 1"):
        stack.exec("trainer", *probe)
    no_token = (
        "import grpc, sys; from saintpipe.protos import feature_shard_pb2 as pb, feature_shard_pb2_grpc as rpc\n"
        "creds = grpc.ssl_channel_credentials(open('/certs/ca.crt', 'rb').read())\n"
        "stub = rpc.FeatureShardStub(grpc.secure_channel('feature-shard-1:50051', creds))\n"
        "try: stub.Info(pb.InfoRequest(), timeout=10)\n"
        "except grpc.RpcError as e: print(e.code().name); sys.exit(0)\n"
        "print('ANSWERED')\n"
    )
    assert stack.exec("trainer", "python", "-c", no_token).strip() == "UNAUTHENTICATED"
    report.add("feature shards: TLS only (a plaintext probe fails), a call without the token is UNAUTHENTICATED")

    # 4. Ray across containers: actors on both sampler nodes; a lost node's actors move to the other.
    two = stack.wait_for("sampler actors on two hosts", lambda: any("2 host(s)" in p for p in _placements(stack)),
                         120, "samplers")
    assert two
    before = _trainer_step(stack)
    placements_before = len(_placements(stack))
    # `docker stop -t 0` kills at once (SIGKILL) and, as a manual stop, keeps the restart policy from bringing
    # the node back: the host is gone, as when a machine fails.
    t_lost = time.monotonic()
    docker("stop", "--time", "0", stack.container("sampler-node"))

    def moved() -> str | None:
        later = _placements(stack)[placements_before:]
        done = [p for p in later if p.endswith("1 host(s): samplers")]
        return done[-1] if done else None

    placement = stack.wait_for("the lost node's sampler actors to run on the samplers node", moved, 180,
                               "samplers")
    moved_after = time.monotonic() - t_lost
    after = _wait_steps_beyond(stack, before, "after a sampler node was lost")
    report.add(f"Ray: sampler actors on 2 hosts; sampler-node killed: all {WORKERS} on the samplers node "
               f"{moved_after:.0f} s later ({placement.split(';')[0]}); training went on (step {before} -> {after})")
    docker("start", stack.container("sampler-node"))

    # 5a. The samplers container crashes: the restart policy brings it back, production resumes.
    restarts = stack.state("samplers")["RestartCount"]
    produced_before = _pool_stats(stack)["produced"]
    stack.crash("samplers")
    stack.wait_restarted("samplers", restarts, 120)
    stack.wait_healthy(["samplers"], 180)
    stack.wait_for("subgraphs produced after the samplers' restart",
                   lambda: _pool_stats(stack)["produced"] > produced_before + 10, 180, "samplers")
    step = _wait_steps_beyond(stack, _trainer_step(stack), "after the samplers' restart")
    report.add(f"samplers crashed (SIGKILL): restarted by the engine, producing again (pool produced {produced_before} -> "
               f"{_pool_stats(stack)['produced']}); training at step {step}")

    # 5b. The trainer crashes: it restarts and resumes from its checkpoint.
    restarts = stack.state("trainer")["RestartCount"]
    resumes = _resumes(stack)
    stack.crash("trainer")
    killed_at = _trainer_step(stack)  # its last logged step (the new process logs nothing for seconds)
    stack.wait_restarted("trainer", restarts, 120)
    resumed_step = _wait_resumed(stack, resumes)
    _assert_resumed_near(resumed_step, killed_at)
    report.add(f"trainer crashed (SIGKILL) at step {killed_at} (last logged): restarted by the engine, resumed "
               f"from step {resumed_step} (lost {killed_at - resumed_step} steps)")

    # 5c. docker restart Redis: the pool comes back from its append-only file.
    stats_before = _pool_stats(stack)
    step = _trainer_step(stack)
    docker("restart", stack.container("redis"), timeout=120)
    stack.wait_healthy(["redis"], 120)
    step_after = _wait_steps_beyond(stack, step, "after Redis restarted")
    stats_after = _pool_stats(stack)
    assert stats_after["produced"] >= stats_before["produced"], (stats_before, stats_after)
    assert stats_after["acknowledged"] >= stats_before["acknowledged"], (stats_before, stats_after)
    report.add(f"Redis restarted: pool counters kept (produced {stats_before['produced']} -> "
               f"{stats_after['produced']}, acknowledged {stats_before['acknowledged']} -> "
               f"{stats_after['acknowledged']}); training went on (step {step} -> {step_after})")

    # 5d. docker kill the trainer: a manual stop for the engine, so `up -d` brings it back; it resumes again.
    resumes = _resumes(stack)
    docker("kill", stack.container("trainer"))
    killed_at = _trainer_step(stack)
    time.sleep(3)
    assert not stack.state("trainer")["Running"], "a docker-killed container came back by itself"
    stack.compose("up", "--detach", "--no-build", "--pull", "never", "trainer", timeout=300)
    resumed_step = _wait_resumed(stack, resumes)
    _assert_resumed_near(resumed_step, killed_at)
    report.add(f"trainer docker-killed at step {killed_at}: stayed down (a manual stop for the engine) until "
               f"`docker compose up -d`, then resumed from step {resumed_step}")

    # 6. The run completes.
    final = stack.wait_for("the trainer to finish", lambda: (st := stack.state("trainer"))["Status"] == "exited"
                           and st, 900, "trainer", interval=3)
    log = stack.logs("trainer")
    assert final["ExitCode"] == 0, log[-3000:]
    summary = _summary(log)
    accuracy = float(summary["test_score"])
    assert accuracy > 0.9, summary
    assert int(summary["resumed_from_step"]) > 0, summary
    stats = _pool_stats(stack)
    accounted = stats["acknowledged"] + stats["depth"] + stats["pending"] + stats["dead_lettered"]
    assert stats["produced"] == accounted, f"pool account does not add up (an entry acknowledged twice?): {stats}"
    assert stats["acknowledged"] >= int(summary["subgraphs"]), (stats, summary)
    sampler_restarts = stack.state("samplers")["RestartCount"]
    report.add(f"test accuracy {accuracy:.4f} after {summary['steps']} steps ({summary['epochs']} epochs); "
               f"trainer resumed from step {summary['resumed_from_step']}, {summary['redelivered']} subgraphs "
               "redelivered to it")
    report.add(f"subgraphs: produced {stats['produced']}, acknowledged {stats['acknowledged']}, waiting "
               f"{stats['depth']}, pending {stats['pending']}, dead-lettered {stats['dead_lettered']}, "
               f"redelivered {stats['redelivered']}; trained in the kept run {summary['subgraphs']} "
               f"(acknowledged but rolled back by the trainer's resume: "
               f"{stats['acknowledged'] - int(summary['subgraphs'])}); samplers container restarts {sampler_restarts}")

    # 6b. A sweep against the stack (the `sweep` profile), the stack's trainer done: two short trials (the
    # example sweep file's grid of two learning rates, one draw each, two epochs, no scheduler). The finished
    # trainer's group is full and nobody reads it: it makes way for the trials' groups. The trainer went quiet
    # seconds ago; a visibility timeout of 5 s lets the sweep see that at once instead of watching it for 30 s.
    t_sweep = time.monotonic()
    out = stack.compose("--profile", "sweep", "run", "--rm", "--no-deps", "-e", "SAINTPIPE_SWEEP__TRIALS=1",
                        "-e", "SAINTPIPE_SWEEP__SCHEDULER=none", "-e", "SAINTPIPE_TRAINER__EPOCHS=2",
                        "-e", "SAINTPIPE_POOL__VISIBILITY_TIMEOUT=5", "sweep", timeout=400)
    sweep_s = time.monotonic() - t_sweep
    start = out.find('{\n  "sweep_dir"')
    assert start >= 0, f"the sweep printed no summary:\n{out[-3000:]}"
    sweep_summary, _ = json.JSONDecoder().raw_decode(out[start:])
    sweep_dir = sweep_summary["sweep_dir"]
    assert sweep_dir.startswith(f"/runs/sweeps/") and sweep_dir.endswith(f"-{JOB}"), sweep_summary
    assert re.search(r"group 'trainers' had no active consumer .* releasing \d+ subgraph", out), out[-3000:]
    rows = json.loads(docker("run", "--rm", "-v", f"{stack.project}_saintpipe-runs:/runs:ro",
                             stack.env["SAINTPIPE_IMAGE"], "cat", f"{sweep_dir}/results.json"))["trials"]
    assert sorted(r["trial"] for r in rows) == ["trial-000", "trial-001"], rows
    for r in rows:
        assert r["stopped_by"] == "finished" and r["steps"] > 0, r
        assert 0 < r["best_val"] <= 1 and 0 < r["test_score"] <= 1, r
        p = r["pool"]
        assert p["produced"] > 0 and p["produced"] == p["acknowledged"] + p["waiting"] + p["pending"] + \
            p["dead_lettered"], f"{r['trial']}: its group's account does not add up: {p}"
    assert sweep_summary["groups_left"] == [] and not sweep_summary["interrupted"], sweep_summary
    groups = ("import json, os; from saintpipe.services.pool.pool import SubgraphPool; "
              f"p = SubgraphPool(os.environ['SAINTPIPE_REDIS_URL'], {JOB!r}); "
              "print(json.dumps([p.groups(), sorted(p.consumers())]))")
    left, on_stream = json.loads(stack.exec("samplers", "python", "-c", groups).strip().splitlines()[-1])
    assert left == ["trainers"] and on_stream == ["trainers"], (left, on_stream)  # handed back, trials gone
    report.add(f"sweep against the stack (profile sweep): 2 trials (best validation "
               f"{max(r['best_val'] for r in rows):.4f}) in {sweep_s:.1f} s; the finished trainer's group made "
               "way, each trial group's account adds up, the job left on its default group")

    # 7. down keeps the model, the checkpoints and the dataset; a new up reuses the dataset; down -v cleans up.
    stack.compose("down", "--timeout", "10")
    volumes = set(stack.left_behind()["volumes"])
    runs_volume = f"{stack.project}_saintpipe-runs"
    # The named volumes stay (pool, dataset, runs, metrics), nothing else.
    assert volumes == {f"{stack.project}_{v}" for v in ("saintpipe-data", "redis-data", "saintpipe-runs",
                                                          "saintpipe-certs", "prometheus-data")}, volumes
    kept = docker("run", "--rm", "-v", f"{runs_volume}:/runs:ro", stack.env["SAINTPIPE_IMAGE"],
                  "ls", f"/runs/{JOB}")
    assert "latest.pt" in kept.split(), kept
    stack.compose("up", "--no-build", "--pull", "never", "prepare-data", timeout=300)
    again = stack.logs("prepare-data")
    assert "kept /data/demo" in again and again.count("wrote /data/demo") == 0, again
    stack.compose("down", "-v", "--timeout", "10")
    left = stack.left_behind()
    assert not any(left.values()), f"left behind after down -v: {left}"
    report.add(f"down: model and checkpoints kept in volume saintpipe-runs ({', '.join(kept.split())}), "
               "dataset kept and reused by the next up; down -v: no container, network or volume left")
