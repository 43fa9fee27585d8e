"""Supervisor: a dead child fails the run with its name, signals request a stop, teardown always completes."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from saintpipe.core import procutil
from saintpipe.pipeline.supervision import Supervisor, describe_exit


def sleeper() -> subprocess.Popen:
    return procutil.spawn([sys.executable, "-c", "import time; time.sleep(60)"])


def test_describe_exit():
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-9) == "signal SIGKILL"


def test_a_child_that_dies_fails_the_run_naming_it_and_everything_is_stopped():
    out = io.StringIO()
    a, b = sleeper(), sleeper()
    sup = Supervisor(interval=0.05, out=out)
    try:
        for name, proc in (("shard a", a), ("shard b", b)):
            sup.on_stop(name, lambda proc=proc: procutil.terminate(proc, grace=5))
            sup.watch_process(name, proc, "127.0.0.1:1234")
        sup.start_watching()
        b.kill()
        assert sup.stop_requested.wait(10)
    finally:
        sup.close()
    assert sup.failure.startswith(f"shard b (pid {b.pid}, 127.0.0.1:1234) exited unexpectedly with signal SIGKILL")
    assert a.poll() is not None  # teardown stopped the healthy one too
    assert "shard b" in out.getvalue()


def test_exits_after_a_stop_was_requested_are_not_failures():
    proc = sleeper()
    sup = Supervisor(interval=0.05, out=io.StringIO())
    sup.watch_process("shard", proc)
    sup.request_stop()
    proc.kill()
    proc.wait()
    sup.check_now()
    sup.close()
    assert sup.failure is None and sup.exit_code == 0


def test_watch_pid_sees_a_process_it_did_not_start_die():
    proc = sleeper()
    sup = Supervisor(interval=0.05, out=io.StringIO())
    sup.watch_pid("redis-server", proc.pid, "127.0.0.1:6379")
    sup.check_now()
    assert sup.failure is None
    proc.kill()
    proc.wait()  # reaped by its owner, as RedisServer does; or a zombie: both count as gone
    sup.check_now()
    sup.close()
    assert sup.failure == f"redis-server (pid {proc.pid}, 127.0.0.1:6379) exited unexpectedly"


def test_teardown_runs_every_step_in_reverse_order_even_when_one_fails():
    calls = []
    sup = Supervisor(out=io.StringIO())
    sup.on_stop("first", lambda: calls.append("first"))
    sup.on_stop("broken", lambda: 1 / 0)
    sup.on_stop("last", lambda: calls.append("last"))
    sup.close()
    sup.close()  # idempotent
    assert calls == ["last", "first"]


def test_a_check_that_raises_counts_as_a_failure_of_its_component():
    sup = Supervisor(out=io.StringIO())

    def broken():
        raise RuntimeError("cannot tell")

    sup.watch("trainers", broken)
    sup.check_now()
    sup.close()
    assert sup.failure == "trainers: health check failed: cannot tell"


def test_sigterm_requests_a_stop_and_sets_the_exit_status():
    out = io.StringIO()
    sup = Supervisor(out=out)
    sup.install_signal_handlers()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert sup.stop_requested.wait(5)
    finally:
        sup.close()
    assert sup.signal == signal.SIGTERM and sup.exit_code == 143
    assert "SIGTERM received" in out.getvalue()
    assert signal.getsignal(signal.SIGTERM) is not sup._on_signal  # handlers restored


def test_a_second_signal_interrupts_a_hanging_teardown_step_and_the_rest_still_runs():
    out = io.StringIO()
    sup = Supervisor(out=out)
    sup.install_signal_handlers()
    calls = []
    sup.on_stop("quick", lambda: calls.append("quick"))
    sup.on_stop("hangs", lambda: time.sleep(30))
    os.kill(os.getpid(), signal.SIGINT)  # the first: stop requested
    assert sup.stop_requested.wait(5)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    sup.close()
    timer.cancel()
    assert time.monotonic() - started < 20
    assert calls == ["quick"] and sup.exit_code == 130


def test_a_dead_child_with_a_restart_is_restarted_by_the_caller_of_restart_pending():
    from saintpipe.pipeline.restarts import RestartBudget

    out = io.StringIO()
    procs = [sleeper()]
    sup = Supervisor(interval=0.05, out=out, budget=RestartBudget(max_restarts=2, window_s=600))
    try:
        sup.on_stop("shard", lambda: procutil.terminate(procs[-1], grace=5))
        sup.watch_process("shard", lambda: procs[-1], "127.0.0.1:1", restart=lambda: procs.append(sleeper()))
        sup.enable_restarts()
        sup.start_watching()
        for n in (1, 2):
            procs[-1].kill()
            deadline = time.monotonic() + 10
            while sup.restart_pending() == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(procs) == n + 1 and procs[-1].poll() is None
        assert not sup.stop_requested.is_set() and sup.failure is None
        assert [e.component for e in sup.restarts] == ["shard", "shard"]
        procs[-1].kill()  # a third death within the window: past the budget
        assert sup.stop_requested.wait(10)
        assert sup.restart_pending() == 0
    finally:
        sup.close()
    assert "restarted 2 times already" in sup.failure and "max_restarts" in sup.failure
    assert "restarting it (1 of 2 restart(s) per 600 s)" in out.getvalue()


def test_before_restarts_are_enabled_a_death_fails_the_run():
    proc = sleeper()
    sup = Supervisor(interval=0.05, out=io.StringIO())
    sup.watch_process("shard", proc, restart=lambda: pytest.fail("restarted during start-up"))
    proc.kill()
    proc.wait()
    sup.check_now()
    sup.close()
    assert sup.failure and "shard" in sup.failure


def test_an_unrestartable_failure_fails_the_run_and_a_failed_restart_too():
    from saintpipe.pipeline.supervision import Failure

    sup = Supervisor(interval=0.05, out=io.StringIO())
    sup.watch("trainers", lambda: Failure("bad config", restartable=False), restart=lambda: None)
    sup.enable_restarts()
    sup.check_now()
    assert sup.failure == "bad config"
    sup.close()

    def broken() -> None:
        raise RuntimeError("port in use")

    sup = Supervisor(interval=0.05, out=io.StringIO())
    sup.watch("shard", lambda: "shard died", restart=broken)
    sup.enable_restarts()
    sup.check_now()
    assert sup.restart_under_way and sup.failure is None
    sup.restart_pending()
    sup.close()
    assert sup.failure == "shard died; restarting it failed: port in use"
