"""RacingSolver: same answers as its contenders, cancellation, crash recovery, no orphans."""

from __future__ import annotations

import contextlib
import errno
import gc
import mmap
import multiprocessing.connection as mpc
import os
import platform
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_py.flow.changes import ARC_DST, ROW_WIDTH, ChangeBatch, ChangeOp
from firmament_py.flow.graph import FlowGraph
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.solvers import (
    BatchError,
    CostScalingSolver,
    InfeasibleError,
    RacingSolver,
    RelaxationSolver,
    SolverCancelled,
    SolverError,
    SuccessiveShortestPathSolver,
    make_solver,
    race_worker,
    racing,
)
from firmament_py.solvers.optimality import verify
from firmament_py.solvers.race_worker import apply_delta, flow_delta


def _alive(pid: int) -> bool:
    try:  # our own child: dead once it can be reaped (peek, leave the reaping to its owner)
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        pass  # someone else's: its main thread shows "Z" while the others still exit
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); look at its state.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_dead(pids: list[int], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def race() -> Iterator[RacingSolver]:
    solver = RacingSolver()
    yield solver
    solver.close()


def test_race_matches_each_contender_over_rounds(race: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=120, running=0.8, waiting=300, seed=3))
    relax, scaling = RelaxationSolver(), CostScalingSolver()
    for _ in range(5):
        result = race.solve_graph(cluster.graph)
        verify(cluster.graph, result)
        assert result.algorithm in ("race:relaxation", "race:cost-scaling")
        assert result.cost == relax.solve_graph(cluster.graph.copy()).cost
        assert result.cost == scaling.solve_graph(cluster.graph.copy()).cost
        cluster.observe(result.flow)
        cluster.next_round(0.02)


def test_race_answers_load_and_apply_without_a_graph(race: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=40, running=0.5, waiting=80, seed=4))
    race.load(cluster.graph.snapshot())
    cluster.graph.discard_changes()
    first = race.solve()
    assert first.cost == SuccessiveShortestPathSolver().solve_graph(cluster.graph.copy()).cost
    cluster.next_round(0.05)
    race.apply(cluster.graph.take_changes())
    second = race.solve()
    verify(cluster.graph, second)
    assert second.cost == SuccessiveShortestPathSolver().solve_graph(cluster.graph.copy()).cost


def _remove_arc(arc: int) -> ChangeBatch:
    rows = np.zeros((1, ROW_WIDTH), dtype=np.int64)
    rows[0, :2] = int(ChangeOp.REMOVE_ARC), arc
    return ChangeBatch(rows)


def test_bad_batches_are_refused_and_the_race_goes_on(race: RacingSolver) -> None:
    # Workers receive a batch before the parent's check raises: they must refuse it too, and
    # that refusal must cost no restart.
    cluster = ClusterGraph(ClusterSpec(machines=40, running=0.5, waiting=80, seed=8))
    snapshot = cluster.graph.snapshot()
    race.load(snapshot)
    cluster.graph.discard_changes()
    race.solve()
    pids = race.worker_pids
    with pytest.raises(BatchError, match="arc 999999 does not exist"):
        race.apply(_remove_arc(999_999))
    dangling = snapshot.rows.copy()
    dangling[-1, ARC_DST] = 999_999
    with pytest.raises(BatchError, match="arc destination 999999 is not among the nodes"):
        race.load(ChangeBatch(dangling, reset=True))
    for _ in range(2):
        cluster.next_round(0.05)
        race.apply(cluster.graph.take_changes())
        result = race.solve()
        verify(cluster.graph, result)
        assert result.cost == SuccessiveShortestPathSolver().solve_graph(cluster.graph.copy()).cost
    assert race.restarts == 0
    assert race.worker_pids == pids


@pytest.mark.parametrize("rounds", [0, 1])
def test_a_worker_that_took_a_batch_the_parent_refused_is_replaced(
    race: RacingSolver, monkeypatch: pytest.MonkeyPatch, rounds: int
) -> None:
    # Parent and workers apply the same rules, so this needs a parent whose check disagrees.
    cluster = ClusterGraph(ClusterSpec(machines=40, running=0.5, waiting=80, seed=9))
    race.load(cluster.graph.snapshot())
    cluster.graph.discard_changes()
    before = race.solve().cost
    for _ in range(rounds):  # an incremental round, here without changes, names the favourite
        race.apply(ChangeBatch.empty())
        assert race.solve().cost == before
    pids = race.worker_pids
    arc = int(cluster.graph.arc_ids()[0])

    def refuse(batch: ChangeBatch) -> None:
        raise BatchError("refused by a stricter parent")

    with monkeypatch.context() as patch:
        patch.setattr(race._ids, "apply", refuse)
        with pytest.raises(BatchError, match="stricter parent"):
            race.apply(_remove_arc(arc))  # valid: the workers remove the arc
    result = race.solve()  # from workers replaced from the history, which lacks the batch
    assert result.cost == before
    verify(cluster.graph, result)
    # With a favourite, only it had the batch: a hedged race sends it to the others only once
    # the parent has taken it (and then while the favourite solves). After a snapshot's first
    # race there is none, and every worker took it.
    assert race.restarts == (2 if rounds == 0 else 1)
    assert len(set(race.worker_pids) & set(pids)) == rounds


def test_killed_worker_is_replaced_from_a_snapshot(race: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=60, running=0.7, waiting=150, seed=5))
    race.solve_graph(cluster.graph)
    victim = race.worker_pids[0]
    os.kill(victim, signal.SIGKILL)
    assert _wait_dead([victim])
    for _ in range(3):
        cluster.next_round(0.02)
        result = race.solve_graph(cluster.graph)
        verify(cluster.graph, result)
    assert race.restarts >= 1
    assert victim not in race.worker_pids
    assert len(race.worker_pids) == 2


def test_both_workers_killed_mid_life_still_answers(race: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.5, waiting=50, seed=6))
    race.solve_graph(cluster.graph)
    pids = race.worker_pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    assert _wait_dead(pids)
    cluster.next_round(0.05)
    result = race.solve_graph(cluster.graph)
    verify(cluster.graph, result)
    assert race.restarts == 2


def test_infeasible_problem_raises_and_race_recovers(race: RacingSolver) -> None:
    g = FlowGraph()
    s, t = g.add_node(supply=3), g.add_node(supply=-3)
    arc = g.add_arc(s, t, capacity=2, cost=1)
    with pytest.raises(InfeasibleError):
        race.solve_graph(g)
    g.change_arc(arc, capacity=5)
    result = race.solve_graph(g)
    assert result.cost == 3


def test_close_stops_workers_and_no_orphans_at_exit() -> None:
    race = RacingSolver()
    pids = race.worker_pids
    race.close()
    assert _wait_dead(pids)


def test_workers_die_with_a_killed_parent() -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from firmament_py.solvers import RacingSolver
        race = RacingSolver()
        print(*race.worker_pids, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    parent.kill()
    parent.wait()
    assert _wait_dead(pids), "racing workers outlived their parent"


def test_workers_die_when_parent_exits_without_close() -> None:
    script = textwrap.dedent(
        """
        from firmament_py.solvers import RacingSolver
        race = RacingSolver()
        print(*race.worker_pids, flush=True)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    pids = [int(p) for p in out.stdout.split()]
    assert _wait_dead(pids)


@pytest.mark.parametrize(
    "solver_class", [SuccessiveShortestPathSolver, RelaxationSolver, CostScalingSolver]
)
def test_a_raised_cancel_flag_stops_the_kernels(solver_class: type) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.5, waiting=60, seed=7))
    solver = solver_class()
    flag = np.array([1, 0], dtype=np.int64)
    solver.use_cancel_flag(flag)
    with pytest.raises(SolverCancelled):
        solver.solve_graph(cluster.graph)
    flag[0] = 0
    result = solver.solve_graph(cluster.graph)
    verify(cluster.graph, result)


def test_race_of_other_contenders_and_options() -> None:
    race = make_solver(
        "race",
        algorithms=("ssp", "relaxation"),
        options={"relaxation": {"incremental": True}},
    )
    try:
        cluster = ClusterGraph(ClusterSpec(machines=50, running=0.6, waiting=100, seed=8))
        for _ in range(3):
            result = race.solve_graph(cluster.graph)
            verify(cluster.graph, result)
            cluster.next_round(0.03)
    finally:
        race.close()


def test_registry_rejects_unknown_names_and_options() -> None:
    with pytest.raises(ValueError, match="unknown solver 'simplex'"):
        make_solver("simplex")
    with pytest.raises(ValueError, match="bad options for solver 'cost-scaling'"):
        make_solver("cost-scaling", gamma=3)
    with pytest.raises(ValueError, match="alpha must be at least 2"):
        make_solver("cost-scaling", alpha=1)
    with pytest.raises(ValueError, match="cannot contain another race"):
        RacingSolver(algorithms=("race", "ssp"))


@given(
    base=st.lists(st.integers(0, 5), max_size=40),
    flow=st.lists(st.integers(0, 5), max_size=40),
)
@settings(max_examples=200, deadline=None)
def test_flow_deltas_reproduce_the_flow(base: list[int], flow: list[int]) -> None:
    b = np.array(base, dtype=np.int64)
    f = np.array(flow, dtype=np.int64)
    length, changed, _values = flow_delta(b, f)
    padded = np.zeros((2, length), dtype=np.int64)
    padded[0, : len(b)], padded[1, : len(f)] = b, f
    assert np.array_equal(changed, np.flatnonzero(padded[0] != padded[1]))  # just what differs
    out = apply_delta(b, flow_delta(b, f))
    assert np.array_equal(out[: len(f)], f)
    assert not out[len(f) :].any()
    assert np.array_equal(b, base)  # a new array
    patched = apply_delta(b, flow_delta(b, f), in_place=True)
    assert np.array_equal(patched, out)
    assert (patched is b) == (len(base) == max(len(base), len(flow)))


def test_caller_may_scribble_on_results(race: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=40, running=0.7, waiting=90, seed=9))
    for _ in range(4):
        result = race.solve_graph(cluster.graph)
        verify(cluster.graph, result)
        result.flow[:] = 7  # must not leak into the workers' bookkeeping
        result.potentials[:] = -1
        cluster.next_round(0.05)


def test_a_result_stays_as_it_was_when_later_rounds_patch_the_workers_flow() -> None:
    # The parent patches its reference flow in place each round; results are copies of it.
    race = RacingSolver(algorithms=STALLERS)  # the winner alternates: every path is taken
    try:
        cluster = ClusterGraph(ClusterSpec(machines=30, running=0.7, waiting=60, seed=12))
        kept = []
        for _ in range(5):
            result = race.solve_graph(cluster.graph)
            verify(cluster.graph, result)
            kept.append((result, result.flow.copy(), result.potentials.copy()))
            cluster.observe(result.flow)
            cluster.next_round(0.1)
        assert len({r.algorithm for r, _, _ in kept}) == 2
        for result, flow, potentials in kept:
            assert np.array_equal(result.flow, flow)
            assert np.array_equal(result.potentials, potentials)
    finally:
        race.close()


# ---------------------------------------------------------------------- deterministic races
# Two stallers take turns: on each solve one waits to be cancelled, so the other wins, and the
# loser must be re-synced from the winner before it wins the next round from that state.

STALLERS = ("tests.stalling_solver:StallEven", "tests.stalling_solver:StallOdd")


@pytest.fixture
def turns() -> Iterator[RacingSolver]:
    solver = RacingSolver(algorithms=STALLERS)
    yield solver
    solver.close()


def _winner(result_algorithm: str) -> str:
    return result_algorithm.removeprefix("race:")


def test_losers_are_cancelled_and_resynced_every_round(turns: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=40, running=0.7, waiting=80, seed=11))
    winners = []
    for _ in range(6):
        result = turns.solve_graph(cluster.graph)
        verify(cluster.graph, result)
        assert result.cost == SuccessiveShortestPathSolver().solve_graph(cluster.graph.copy()).cost
        winners.append(_winner(result.algorithm))
        cluster.observe(result.flow)
        cluster.next_round(0.05)
    assert winners == [STALLERS[1], STALLERS[0]] * 3


def test_load_after_a_cancelled_solve_starts_from_the_new_graph(turns: RacingSolver) -> None:
    # Regression: a worker cancelled in one graph's race used to be synced to that graph's
    # flow after the next load, so the parent's and the worker's flow bases disagreed.
    for seed in range(4):
        cluster = ClusterGraph(ClusterSpec(machines=20 + 5 * seed, running=0.6, waiting=40))
        turns.load(cluster.graph.snapshot())
        cluster.graph.discard_changes()
        first = turns.solve()
        verify(cluster.graph, first)
        cluster.observe(first.flow)
        cluster.next_round(0.1)
        turns.apply(cluster.graph.take_changes())
        second = turns.solve()
        verify(cluster.graph, second)


def test_explicit_sync_after_a_cancelled_solve(turns: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=12))
    first = turns.solve_graph(cluster.graph)
    turns.sync(first.flow, first.potentials)  # the cancelled loser settles before this
    assert np.array_equal(turns.potentials()[: len(first.potentials)], first.potentials)
    cluster.next_round(0.1)
    result = turns.solve_graph(cluster.graph)
    verify(cluster.graph, result)
    assert result.cost == SuccessiveShortestPathSolver().solve_graph(cluster.graph.copy()).cost


def test_worker_killed_while_it_stalls_mid_race(turns: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=13))
    turns.solve_graph(cluster.graph)  # StallEven stalled and lost; StallOdd stalls next
    pid_of = dict(zip(STALLERS, turns.worker_pids, strict=True))
    killer = threading.Timer(0.3, os.kill, (pid_of[STALLERS[1]], signal.SIGKILL))
    killer.start()
    cluster.next_round(0.05)
    result = turns.solve_graph(cluster.graph)  # StallEven wins while StallOdd is killed
    killer.join()
    verify(cluster.graph, result)
    assert _wait_dead([pid_of[STALLERS[1]]])
    cluster.next_round(0.05)
    result = turns.solve_graph(cluster.graph)  # the replacement is loaded from a snapshot
    verify(cluster.graph, result)
    assert turns.restarts == 1


def test_registry_imports_solvers_by_path() -> None:
    solver = make_solver("tests.stalling_solver:StallOdd")
    assert isinstance(solver, SuccessiveShortestPathSolver)
    with pytest.raises(ValueError, match="cannot import"):
        make_solver("no_such_module:Solver")
    with pytest.raises(ValueError, match="not a FlowSolver subclass"):
        make_solver("tests.stalling_solver:STALL_SECONDS")


@pytest.mark.parametrize("hedge", [1e6, None])
def test_hedged_start_lets_the_favourite_solve_alone(hedge: float | None) -> None:
    # Once ssp has won an incremental round (the second) it starts alone; the staller would only
    # join if ssp took longer than `hedge` times its last solve (a huge factor here, so that a
    # slow test machine cannot make it join), so with hedging it does not start again in the
    # next rounds (the first probe would come at the seventh), while without it every round
    # starts it (and cancels it).
    race = RacingSolver(algorithms=("ssp", "tests.stalling_solver:StallAlways"), hedge=hedge)
    try:
        cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=14))
        for _ in range(5):
            result = race.solve_graph(cluster.graph)
            verify(cluster.graph, result)
            assert result.algorithm == "race:ssp"
            cluster.observe(result.flow)
            cluster.next_round(0.05)
        staller = next(w for w in race._workers if w.algorithm.endswith("StallAlways"))
        assert staller.solves == (2 if hedge is not None else 5)
    finally:
        race.close()


@pytest.mark.parametrize("size", [0, 1, 16384, 16385, 3 << 20])
def test_a_framed_batch_reads_back_as_the_connection_would_send_it(size: int) -> None:
    # Batches go out framed by racing._write_framed in one writev; the worker
    # reads them with Connection.recv_bytes, so the framing must be exactly send_bytes'.
    ours, theirs = socket.socketpair()
    sender, receiver = mpc.Connection(ours.detach()), mpc.Connection(theirs.detach())
    payload = os.urandom(size)
    try:
        writer = threading.Thread(target=racing._write_framed, args=(sender.fileno(), payload))
        writer.start()
        assert receiver.recv_bytes() == payload
        writer.join()
    finally:
        sender.close()
        receiver.close()


def test_a_probe_finds_a_solver_that_has_become_faster_than_the_favourite() -> None:
    # SlowOnSecond wins the first race, then hangs on its second solve: SteadyThird joins and
    # wins, and would keep the race for ever (it answers well within its own hedge delay). After
    # four hedged solves a probe starts both, and SlowOnSecond, fast again, wins it.
    slow, steady = "tests.stalling_solver:SlowOnSecond", "tests.stalling_solver:SteadyThird"
    race = RacingSolver(algorithms=(slow, steady))
    try:
        assert race.wait_ready(timeout=60)  # else a late warm-up could lose the first race
        cluster = ClusterGraph(ClusterSpec(machines=20, running=0.5, waiting=30, seed=18))
        winners = []
        for _ in range(8):
            result = race.solve_graph(cluster.graph)
            verify(cluster.graph, result)
            winners.append(_winner(result.algorithm))
            cluster.observe(result.flow)
            cluster.next_round(0.05)
        assert winners == [slow] + [steady] * 5 + [slow] * 2
        held = next(w for w in race._workers if w.algorithm == slow)
        assert held.solves == 4  # rounds 1, 2, 7 (the probe) and 8: held back in 3 to 6
    finally:
        race.close()


def test_probes_come_less_often_and_a_late_favourite_brings_them_back() -> None:
    race = RacingSolver(algorithms=("ssp",))
    race._favourite = ("ssp", 0.01)
    probes = []
    for solve in range(300):
        probe = race._probe_due()
        if probe:
            probes.append(solve)
        # Two solvers about as fast: each probe goes to the other, and still they thin out.
        winner = ("ssp", "relaxation")[len(probes) % 2] if probe else race._favourite[0]
        race._count_probes(race._favourite[0], winner, probe)
        race._favourite = (winner, 0.01)
    assert probes == [4, 13, 30, 63, 128, 193, 258]  # waits of 4, 8, 16, 32, then 64 at most
    # A favourite so late that a held worker joined and won: probes come soon again.
    race._count_probes(race._favourite[0], "other", False)
    assert race._probe_after == 4 and race._hedged == 0
    race.close()


FIRST, FIFTH = "tests.stalling_solver:StallFirstTwo", "tests.stalling_solver:StallFromFifth"


@pytest.fixture
def held_back() -> Iterator[RacingSolver]:
    """StallFirstTwo loses the first two races, so from the second on StallFromFifth is the
    favourite until it stalls. Without idle time: the tests follow what is deferred, and the
    idle timer would send it at a time of its own."""
    solver = RacingSolver(algorithms=(FIRST, FIFTH), idle=None)
    yield solver
    solver.close()


def _name_the_favourite(race: RacingSolver, cluster: ClusterGraph) -> None:
    """Load the cluster and solve it, then one incremental round: its winner is the favourite.
    A snapshot's first race names none, so its loser gets the answer at once."""
    race.load(cluster.graph.snapshot())
    cluster.graph.discard_changes()
    cluster.observe(race.solve().flow)
    assert race._favourite is None
    assert not any(w.deferred for w in race._workers)
    cluster.next_round(0.05)
    race.apply(cluster.graph.take_changes())
    cluster.observe(race.solve().flow)
    assert race._favourite is not None


def test_a_held_worker_that_only_took_answers_can_still_win(held_back: RacingSolver) -> None:
    # A held worker gets each round's batch, and the answer before it, while the favourite
    # solves. Here the favourite answers alone for three rounds and then stalls: the held worker
    # joins and must solve from what it was sent.
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=16))
    winners = []
    for _ in range(5):
        result = held_back.solve_graph(cluster.graph)
        verify(cluster.graph, result)
        reference = SuccessiveShortestPathSolver().solve_graph(cluster.graph.copy())
        assert result.cost == reference.cost
        winners.append(_winner(result.algorithm))
        cluster.observe(result.flow)
        cluster.next_round(0.05)
    assert winners == [FIFTH] * 4 + [FIRST]
    held = next(w for w in held_back._workers if w.algorithm == FIRST)
    assert held.solves == 3  # the first two races, and the one it joined
    assert held_back.restarts == 0


def test_a_held_worker_catches_up_while_the_favourite_solves(held_back: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=17))
    _name_the_favourite(held_back, cluster)  # StallFromFifth
    held = next(w for w in held_back._workers if w.algorithm == FIRST)
    favourite = next(w for w in held_back._workers if w.algorithm == FIFTH)
    # The loser will be held back next round: the answer waits for that round's solve.
    assert [tag for tag, _ in held.deferred] == ["adopt"]
    cluster.next_round(0.05)
    held_back.apply(cluster.graph.take_changes())
    assert [tag for tag, _ in held.deferred] == ["adopt", "apply"]
    assert not favourite.deferred
    result = held_back.solve()  # the favourite answers alone; the held worker catches up
    verify(cluster.graph, result)
    assert [tag for tag, _ in held.deferred] == ["sync"]
    assert held.solves == 2
    # A snapshot the parent refuses changes nothing, so the deferred answer still stands;
    # whatever comes next (here a solve with everybody, as if the favourite were late), the
    # held worker gets it first and solves the same graph.
    dangling = cluster.graph.snapshot().rows.copy()
    dangling[-1, ARC_DST] = 999_999
    with pytest.raises(BatchError, match="arc destination 999999"):
        held_back.load(ChangeBatch(dangling, reset=True))
    assert [tag for tag, _ in held.deferred] == ["sync"]
    held_back.hedge = None
    assert not _the_held_worker_wins_once_the_favourite_stalls(held_back, cluster)
    assert held_back.restarts == 0


def _the_held_worker_wins_once_the_favourite_stalls(
    race: RacingSolver, cluster: ClusterGraph
) -> list[tuple[str, Any]]:
    """Solve rounds until StallFromFifth stalls and StallFirstTwo wins; every answer is
    verified. Returns what StallFirstTwo still has deferred, which should be nothing."""
    held = next(w for w in race._workers if w.algorithm == FIRST)
    for _ in range(4):
        result = race.solve()
        verify(cluster.graph, result)  # the flow is rebuilt from the winner's base
        if _winner(result.algorithm) == FIRST:
            return held.deferred
        cluster.observe(result.flow)
        cluster.next_round(0.05)
        race.apply(cluster.graph.take_changes())
    raise AssertionError("StallFirstTwo never won")


def test_a_load_that_fails_part_way_keeps_what_was_deferred(
    held_back: RacingSolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A load that fails before the parent's check (here: no descriptor for the first worker's
    # snapshot, the held one's) never reached it: what was deferred for it must still be sent.
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=17))
    _name_the_favourite(held_back, cluster)
    held = next(w for w in held_back._workers if w.algorithm == FIRST)
    assert [tag for tag, _ in held.deferred] == ["adopt"]
    real_dup, calls = os.dup, []

    def dup_once(fd: int) -> int:
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_dup(fd)

    monkeypatch.setattr(racing.os, "dup", dup_once)
    with pytest.raises(OSError, match="Too many open files"):
        held_back.load(cluster.graph.snapshot())
    monkeypatch.setattr(racing.os, "dup", real_dup)
    assert [tag for tag, _ in held.deferred] == ["adopt"]
    assert held_back.restarts == 0  # nobody took the snapshot
    held_back.hedge = None
    cluster.next_round(0.05)
    held_back.apply(cluster.graph.take_changes())
    assert not _the_held_worker_wins_once_the_favourite_stalls(held_back, cluster)


def test_a_snapshot_drops_what_was_deferred(held_back: RacingSolver) -> None:
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=18))
    _name_the_favourite(held_back, cluster)  # StallFromFifth: StallFirstTwo's adopt waits
    held = next(w for w in held_back._workers if w.algorithm == FIRST)
    assert held.deferred
    sent = [tag for tag, _ in held.owed]
    cluster.next_round(0.05)
    held_back.load(cluster.graph.snapshot())
    cluster.graph.discard_changes()
    assert not held.deferred
    assert [tag for tag, _ in held.owed] == [*sent, "load"]  # the adopt was never sent
    verify(cluster.graph, held_back.solve())


def test_idle_time_sends_what_was_deferred_and_asks_every_worker_to_prepare(
    held_back: RacingSolver,
) -> None:
    # The caller away after a solve: the held worker gets the answer deferred for it, and
    # every worker `prepare`s, in order; the rounds after are as before.
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=23))
    _name_the_favourite(held_back, cluster)
    held = next(w for w in held_back._workers if w.algorithm == FIRST)
    favourite = next(w for w in held_back._workers if w.algorithm == FIFTH)
    assert [tag for tag, _ in held.deferred] == ["adopt"]
    owed = {id(w): [tag for tag, _ in w.owed] for w in (held, favourite)}
    # Stale (a call came since) or while the caller is in a call: nothing happens.
    held_back._use_idle_time(held_back._calls - 1)
    with held_back._lock:  # the caller's thread holds it during every call
        away = threading.Thread(target=held_back._use_idle_time, args=(held_back._calls,))
        away.start()
        away.join()
    assert [tag for tag, _ in held.deferred] == ["adopt"]
    held_back._use_idle_time(held_back._calls)
    assert not held.deferred
    assert [tag for tag, _ in held.owed] == [*owed[id(held)], "adopt", "prepare"]
    assert [tag for tag, _ in favourite.owed] == [*owed[id(favourite)], "prepare"]
    for _ in range(2):
        cluster.next_round(0.05)
        held_back.apply(cluster.graph.take_changes())
        result = held_back.solve()
        verify(cluster.graph, result)
        assert _winner(result.algorithm) == FIFTH
        cluster.observe(result.flow)
    assert held_back.restarts == 0


def test_the_idle_timer_fires_once_the_caller_is_away_and_a_call_cancels_it() -> None:
    race = RacingSolver(algorithms=(FIRST, FIFTH))
    try:
        cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=24))
        _name_the_favourite(race, cluster)
        held = next(w for w in race._workers if w.algorithm == FIRST)
        deadline = time.monotonic() + 30
        while held.deferred and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not held.deferred
        assert [tag for tag, _ in held.owed][-2:] == ["adopt", "prepare"]
        cluster.next_round(0.05)
        race.apply(cluster.graph.take_changes())  # cancels nothing: the timer has fired
        result = race.solve()
        verify(cluster.graph, result)
        assert race._idle_timer is not None
        cluster.next_round(0.05)
        race.apply(cluster.graph.take_changes())
        assert race._idle_timer is None  # a call cancels it
    finally:
        race.close()


def test_a_round_much_larger_than_recent_ones_races_everybody() -> None:
    # A big job arriving after small rounds (about 200 rows each): the favourite of small
    # rounds may crawl on it, so the round starts everybody, and the held worker gets its
    # deferred answer with the job's batch.
    never = "tests.stalling_solver:StallAlways"
    race = RacingSolver(algorithms=("ssp", never), hedge=1e6, idle=None)
    try:
        cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=19))
        _name_the_favourite(race, cluster)  # ssp: the staller never answers
        staller = next(w for w in race._workers if w.algorithm == never)
        for _ in range(2):
            cluster.next_round(0.05)
            race.apply(cluster.graph.take_changes())
            assert race._hold_back() == [staller]
            cluster.observe(race.solve().flow)
        assert staller.solves == 2 and staller.deferred
        cluster.submit_job(200)
        job = cluster.graph.take_changes()
        assert len(job) > 4 * 256
        race.apply(job)
        assert race._hold_back() == [] and not staller.deferred
        result = race.solve()
        verify(cluster.graph, result)
        assert result.algorithm == "race:ssp"
        assert staller.solves == 3
        # Now that the job's round is a recent one, another like it is not outsized.
        cluster.submit_job(200)
        race.apply(cluster.graph.take_changes())
        assert race._hold_back() == [staller]
        verify(cluster.graph, race.solve())
        assert staller.solves == 3
    finally:
        race.close()


@contextlib.contextmanager
def _third_round(favourite: str, other: str, seed: int) -> Iterator[tuple[RacingSolver, str]]:
    """A race of `favourite` and `other` whose first two rounds `favourite` wins (the second
    names it the favourite): yields the race and the winner of its third round, whose answer
    is checked."""
    race = RacingSolver(algorithms=(favourite, other))
    try:
        cluster = ClusterGraph(ClusterSpec(machines=20, running=0.5, waiting=30, seed=seed))
        for _ in range(2):
            assert _winner(race.solve_graph(cluster.graph).algorithm) == favourite
            cluster.next_round(0.1)
        result = race.solve_graph(cluster.graph)
        verify(cluster.graph, result)
        yield race, _winner(result.algorithm)
    finally:
        race.close()


def test_the_hedge_clock_waits_for_the_favourite_to_apply_its_batch() -> None:
    # SlowToApply wins the first two races (StallAlways never answers), the second in 0.1 s, so
    # the other joins a later race after 1.5 x 0.1 + 0.05 s. Its next batch takes 2 s to apply
    # and its solve 0.1 s: counted from the apply, the favourite answers well inside the delay.
    slow, never = "tests.stalling_solver:SlowToApply", "tests.stalling_solver:StallAlways"
    with _third_round(slow, never, seed=22) as (race, winner):
        assert winner == slow
        held = next(w for w in race._workers if w.algorithm == never)
        assert held.solves == 2  # the first two races only: it was never started in the third


def test_held_workers_start_at_once_when_the_favourite_dies_applying_its_batch() -> None:
    # DieOnApply wins the first two races (StallFirstTwo stalls in both) and dies applying the
    # next batch. StallFirstTwo, held back, must start then and not wait for the replacement,
    # which takes two seconds to start and a load before it could solve.
    dies, held = "tests.stalling_solver:DieOnApply", FIRST
    with _third_round(dies, held, seed=23) as (race, winner):
        assert winner == held
        assert race.restarts == 1


def test_held_workers_start_after_a_grace_when_the_favourite_hangs_applying(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(racing, "_APPLY_GRACE_SECONDS", 0.5)
    hangs, held = "tests.stalling_solver:HangOnApply", FIRST
    with _third_round(hangs, held, seed=24) as (_, winner):  # without the backstop: 30 s
        assert winner == held


def test_a_worker_is_not_restarted_from_batches_without_their_snapshot() -> None:
    # Once the graph a race was bound to is gone, the batches applied since cannot rebuild a
    # worker on their own: the race says so instead of replaying them into an empty one, and
    # takes up again once it is given a snapshot.
    race = RacingSolver()
    try:
        cluster = ClusterGraph(ClusterSpec(machines=20, running=0.5, waiting=30, seed=18))
        graph = cluster.graph
        race.solve_graph(graph)
        mirror = graph.copy()
        del cluster, graph
        gc.collect()
        mirror.change_arc(int(mirror.arc_ids()[0]), cost=7)
        race.apply(mirror.take_changes())
        pid = race.worker_pids[0]
        os.kill(pid, signal.SIGKILL)
        assert _wait_dead([pid])
        for _ in range(2):  # known dead before the race: no race runs, every time
            with pytest.raises(SolverError, match="the graph the race was bound to is gone"):
                race.solve()
        assert race.restarts == 0
        assert pid not in race.worker_pids
        race.load(mirror.snapshot())
        result = race.solve()
        assert result.cost == SuccessiveShortestPathSolver().solve_graph(mirror.copy()).cost
        assert race.restarts == 1
        assert len(race.worker_pids) == 2
    finally:
        race.close()


def test_a_worker_dying_mid_race_without_a_snapshot_leaves_the_survivor_to_answer() -> None:
    dies, survives = "tests.stalling_solver:DieOnSecond", "tests.stalling_solver:StallEven"
    race = RacingSolver(algorithms=(dies, survives))
    try:
        cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=19))
        graph = cluster.graph
        first = race.solve_graph(graph)  # StallEven stalls on its first solve: DieOnSecond wins
        assert _winner(first.algorithm) == dies
        mirror = graph.copy()
        del cluster, graph
        gc.collect()
        mirror.change_arc(int(mirror.arc_ids()[0]), cost=7)
        race.apply(mirror.take_changes())
        pid = race.worker_pids[0]
        result = race.solve()  # DieOnSecond dies mid-solve; StallEven answers, nothing replaces it
        assert _winner(result.algorithm) == survives
        assert result.cost == SuccessiveShortestPathSolver().solve_graph(mirror.copy()).cost
        assert race.restarts == 0
        assert _wait_dead([pid])  # if the race ended before its death was seen, the next sees it
        with pytest.raises(SolverError, match="the graph the race was bound to is gone"):
            race.solve()
    finally:
        race.close()


def test_wait_ready_waits_for_every_worker_to_warm_up_or_die() -> None:
    slow = "tests.stalling_solver:SlowToStart"
    race = RacingSolver(algorithms=(slow, "ssp"))
    try:
        assert not race.wait_ready(timeout=0.2)  # its warm-up alone takes a second
        assert race.wait_ready()
        assert all(w.flag[2] == 1 for w in race._workers)  # every worker, not just the first
        cluster = ClusterGraph(ClusterSpec(machines=20, running=0.5, waiting=30, seed=20))
        verify(cluster.graph, race.solve_graph(cluster.graph))
    finally:
        race.close()
    race = RacingSolver(algorithms=(slow, "ssp"))
    try:
        pid = race.worker_pids[0]
        os.kill(pid, signal.SIGKILL)
        assert _wait_dead([pid])
        assert race.wait_ready(timeout=60)  # a dead worker is not waited for
        cluster = ClusterGraph(ClusterSpec(machines=20, running=0.5, waiting=30, seed=21))
        verify(cluster.graph, race.solve_graph(cluster.graph))
        assert race.restarts == 1
    finally:
        race.close()


def test_an_in_process_solver_is_ready_when_built() -> None:
    assert SuccessiveShortestPathSolver().wait_ready(timeout=0)


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
@pytest.mark.parametrize("name", ["hedge", "idle"])
def test_hedge_and_idle_must_be_finite_non_negative_numbers(name: str, value: float) -> None:
    with pytest.raises(ValueError, match=name):
        RacingSolver(**{name: value})


def test_the_hedge_delay_counts_the_favourites_solve_not_the_warm_up() -> None:
    # The first races of a fresh RacingSolver wait for its workers to warm up (about a second);
    # were that counted, the others would be held back that long in the next round.
    race = RacingSolver()
    try:
        cluster = ClusterGraph(ClusterSpec(machines=20, running=0.5, waiting=30, seed=15))
        race.solve_graph(cluster.graph)  # a snapshot's first race: no favourite
        assert race._favourite is None
        cluster.next_round(0.05)
        start = time.perf_counter()
        result = race.solve_graph(cluster.graph)
        seen = time.perf_counter() - start
        solve = result.stats["solver_time"]
        assert solve < seen
        assert race._hedge_delay() == pytest.approx(1.5 * solve + 0.05)
    finally:
        race.close()


class _SlowConnection:
    """A worker's socket whose write of a message takes a second, or ends as a real one does
    when its handle is closed under it (`multiprocessing.connection` then writes to None)."""

    def __init__(self) -> None:
        self.closed = False
        self.writing = threading.Event()
        self.peer_gone = threading.Event()

    def send_bytes(self, data: bytes) -> None:
        self.writing.set()
        deadline = time.monotonic() + 1.0
        while not self.closed and time.monotonic() < deadline:
            time.sleep(0.005)
        if self.closed:
            raise TypeError("'NoneType' object cannot be interpreted as an integer")

    def send(self, message: object) -> None:
        self.send_bytes(b"")

    def fileno(self) -> int:
        return -1  # batches are written with racing._write_framed, replaced by the test

    def recv(self) -> object:
        self.peer_gone.wait(10)
        raise EOFError

    def close(self) -> None:
        self.closed = True


def test_a_worker_that_ends_while_a_message_is_written_to_it_is_closed_quietly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The receiver closes a worker's socket once the worker is gone; a message still being
    written must end first (found as a traceback when a race was closed after ten inc90 rounds:
    its held worker was stopped while its backlog was written)."""
    failures: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))
    connection = _SlowConnection()
    monkeypatch.setattr(racing, "_write_framed", lambda fd, data: connection.send_bytes(data))
    flag_map = mmap.mmap(-1, 24)
    worker = racing._Worker(
        "cost-scaling",
        process=None,  # type: ignore[arg-type]  # the threads never touch it
        conn=connection,  # type: ignore[arg-type]
        flag_map=flag_map,
        flag=np.zeros(3, dtype=np.int64),
    )
    replies: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
    threads = [
        threading.Thread(target=racing._sender, args=(worker, replies)),
        threading.Thread(target=racing._receiver, args=(worker, replies)),
    ]
    for thread in threads:
        thread.start()
    worker.outbox.put(b"a round's backlog")
    assert connection.writing.wait(10)
    connection.peer_gone.set()  # the worker ends mid-write: its socket reads end of file
    assert replies.get(timeout=10) == (worker, racing._DIED)
    worker.outbox.put(None)
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    flag_map.close()
    assert failures == []
    assert connection.closed


def _open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists descriptors in /proc")
def test_a_shared_snapshot_arrives_as_aligned_writable_views_and_leaves_no_descriptor() -> None:
    # A load's arrays travel in a memory file the worker maps; they must come back equal, as
    # views (not copies) that the compiled kernels take as they are (aligned, writable), and
    # every descriptor of the file must be closed on both sides.
    cluster = ClusterGraph(ClusterSpec(machines=30, running=0.6, waiting=60, seed=14))
    snapshot = cluster.graph.snapshot()
    ours, theirs = socket.socketpair()
    sender, receiver = mpc.Connection(ours.detach()), mpc.Connection(theirs.detach())
    before = _open_descriptors()
    try:
        payload, fd = racing._share(snapshot)
        try:
            racing._write_framed(sender.fileno(), payload)
            racing._send_descriptor(sender.fileno(), fd)
        finally:
            os.close(fd)
        message = receiver.recv()
        assert message[0] == "shared"
        command, batch = race_worker.take_shared(receiver, message)
        assert command == "load" and batch.reset
        np.testing.assert_array_equal(batch.rows, snapshot.rows)
        assert not batch.rows.flags.owndata
        assert batch.rows.flags.aligned and batch.rows.flags.writeable
        batch.rows[:] = -1  # copy on write: the memory file, and the parent's rows, keep theirs
        assert not np.array_equal(batch.rows, snapshot.rows)
        del batch, message
        gc.collect()  # the mapping (which holds a descriptor of its own) goes with the arrays
        assert _open_descriptors() == before
    finally:
        sender.close()
        receiver.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists descriptors in /proc")
def test_a_sender_that_stops_closes_the_snapshots_it_never_sent() -> None:
    worker = racing._Worker(
        "cost-scaling",
        process=None,  # type: ignore[arg-type]  # the sender never touches it
        conn=mpc.Connection(os.open(os.devnull, os.O_WRONLY)),
        flag_map=None,  # type: ignore[arg-type]
        flag=np.zeros(3, dtype=np.int64),
    )
    try:
        before = _open_descriptors()
        rows = np.ones((4, ROW_WIDTH), dtype=np.int64)
        payload, fd = racing._share(ChangeBatch(rows, reset=True))
        worker.outbox.put(None)  # the sender stops first ...
        worker.outbox.put(racing._SharedLoad(payload, fd))  # ... with a snapshot still queued
        racing._sender(worker, None)
        assert _open_descriptors() == before
    finally:
        worker.conn.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists descriptors in /proc")
def test_a_race_that_loads_snapshots_and_closes_leaves_no_descriptor_open() -> None:
    before = _open_descriptors()
    race = RacingSolver()
    try:
        for seed in (3, 4, 5):
            graph = ClusterGraph(ClusterSpec(machines=20, running=0.5, waiting=30, seed=seed)).graph
            verify(graph, race.solve_graph(graph))
    finally:
        race.close()
    del race  # its workers' flag mappings hold a descriptor each until it is collected
    gc.collect()
    deadline = time.monotonic() + 10
    while _open_descriptors() != before and time.monotonic() < deadline:
        time.sleep(0.05)  # the receiver threads close the sockets once the workers have ended
    assert _open_descriptors() == before


def test_a_race_loads_and_solves_a_snapshot_of_no_rows() -> None:
    # Its one array has zero bytes: the worker cannot map an empty memory file, and must still
    # hand pickle the (empty) buffer it expects.
    race = RacingSolver(hedge=None)
    try:
        race.load(ChangeBatch(np.zeros((0, ROW_WIDTH), dtype=np.int64), reset=True))
        assert race.solve().cost == 0
        assert race.restarts == 0
    finally:
        race.close()


def test_a_snapshots_first_answer_reaches_the_losers_as_the_winners_own_delta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every worker's base after a load is the same (empty) flow, so the parent computes no
    # second delta over the whole flow for the losers (1 to 2 ms on S50's graph).
    computed: list[int] = []
    delta = racing.flow_delta

    def counting(base: np.ndarray, flow: np.ndarray) -> racing.FlowDelta:
        computed.append(len(flow))
        return delta(base, flow)

    monkeypatch.setattr(racing, "flow_delta", counting)
    race = RacingSolver(hedge=None)
    try:
        cluster = ClusterGraph(ClusterSpec(machines=20, running=0.5, waiting=30, seed=3))
        result = race.solve_graph(cluster.graph)
        verify(cluster.graph, result)
        assert computed == []
        assert all(w.base is race._workers[0].base for w in race._workers)
        cluster.observe(result.flow)
        cluster.next_round(0.1)
        verify(cluster.graph, race.solve_graph(cluster.graph))
        assert race.restarts == 0
    finally:
        race.close()


def test_a_worker_whose_snapshot_descriptor_cannot_be_sent_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The frame went out without its descriptor, so the stream is out of step: the sender ends
    # the socket, and the next race replaces the worker from the bound graph.
    failures = iter([True])
    send = racing._send_descriptor

    def failing_once(sock_fd: int, fd: int) -> None:
        if next(failures, False):
            raise OSError("too many references")
        send(sock_fd, fd)

    monkeypatch.setattr(racing, "_send_descriptor", failing_once)
    race = RacingSolver(hedge=None)
    try:
        cluster = ClusterGraph(ClusterSpec(machines=20, running=0.5, waiting=30, seed=6))
        for _ in range(2):
            result = race.solve_graph(cluster.graph)
            verify(cluster.graph, result)
            cluster.observe(result.flow)
            cluster.next_round(0.05)
        assert race.restarts == 1
        assert all(w.sender_running for w in race._live())
    finally:
        race.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads a worker's environment in /proc")
def test_workers_tune_their_allocator_unless_the_caller_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")
    race = RacingSolver(algorithms=("ssp",))
    try:
        with open(f"/proc/{race.worker_pids[0]}/environ", "rb") as file:
            environ = file.read().split(b"\0")
    finally:
        race.close()
    assert f"MALLOC_MMAP_THRESHOLD_={32 << 20}".encode() in environ
    assert b"MALLOC_TRIM_THRESHOLD_=12345" in environ


def test_a_worker_warms_as_much_heap_as_a_round_takes_but_never_a_block_glibc_would_map() -> None:
    small = CostScalingSolver()
    small.solve_graph(ClusterGraph(ClusterSpec(machines=10, running=0.5, waiting=20)).graph)
    network = small.network
    assert race_worker.heap_warm_bytes(small) == 32 * (network.arc_bound + network.node_bound)
    large = CostScalingSolver()
    large.load(ChangeBatch(np.zeros((0, ROW_WIDTH), dtype=np.int64), reset=True))
    large.network._ensure(1 << 20, 1 << 20)  # a million nodes and arcs: 64 MB to warm
    mapped_from = int(racing._WORKER_ALLOCATOR["MALLOC_MMAP_THRESHOLD_"])
    assert 30 << 20 < race_worker.heap_warm_bytes(large) < mapped_from


class _CommandAfter:
    """A `waiting()` for `_warm_heap` that says a command waits once it was asked `after`
    times (None: never), counting the questions."""

    def __init__(self, after: int | None) -> None:
        self.after, self.asked = after, 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.after is not None and self.asked > self.after


def test_the_heap_warm_stops_once_a_command_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    # A solve sent right after a load must not wait for the whole warm (16 to 36 ms on S50's
    # load-spreading graph): the warm asks before every chunk whether a command has come.
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the heap warm needs glibc")
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", str(race_worker.HEAP_BLOCKS_UNDER))
    monkeypatch.setattr(race_worker, "_HEAP_WARM_CHUNK_BYTES", 4096)  # a small graph's pages
    solver = CostScalingSolver()
    solver.solve_graph(ClusterGraph(ClusterSpec(machines=10, running=0.5, waiting=20)).graph)
    chunks = -(-race_worker.heap_warm_bytes(solver) // race_worker._HEAP_WARM_CHUNK_BYTES)
    assert chunks > 1
    for waits_after, asked in ((None, chunks), (0, 1), (1, 2)):
        waiting = _CommandAfter(waits_after)
        race_worker._warm_heap(solver, waiting)
        assert waiting.asked == asked
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")  # other settings: no warm, no questions
    race_worker._warm_heap(solver, lambda: pytest.fail("asked without warming"))


def test_a_worker_stuck_in_a_solve_is_replaced_even_when_rounds_keep_cancelling_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each round sends the stuck worker another solve and cancels it when the other wins; the
    # grace must still run from the first cancel it ignored.
    monkeypatch.setattr(racing, "_CANCEL_GRACE_SECONDS", 1.0)
    race = RacingSolver(algorithms=("ssp", "tests.stalling_solver:IgnoresCancel"), hedge=None)
    try:
        assert race.wait_ready(60)
        cluster = ClusterGraph(ClusterSpec(machines=10, running=0.5, waiting=20, seed=3))
        stuck = race.worker_pids[1]
        deadline = time.monotonic() + 20
        while race.restarts == 0 and time.monotonic() < deadline:
            result = race.solve_graph(cluster.graph)
            verify(cluster.graph, result)
            cluster.observe(result.flow)
            cluster.next_round(0.05)
            time.sleep(0.2)  # rounds far closer together than the grace
        assert race.restarts == 1
        assert stuck not in race.worker_pids
    finally:
        race.close()
