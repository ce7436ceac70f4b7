"""Bad change batches given to solvers (firmament_py/solvers/batch_check.py).

A solver's residual network is changed by a compiled kernel that trusts its batches, so
`FlowSolver.apply` / `load` check every batch first. Covered:

* each kind of bad row (unknown operation, ids out of range, nodes and arcs that do not exist or
  already exist, arcs whose node an earlier row removed, bad values, rows out of order, an id
  twice in one group, a change naming other ends) raises `BatchError` naming the row, the
  operation and the id, and leaves the network exactly as it was: the next solve gives the
  previous answer;
* legal but tricky batches (an arc id freed by a node removal reused; a node removed and added
  again; an arc added and changed in one batch) are accepted and solved right;
* bad snapshots are refused by `load`; a cost beyond 64 bits is a `SolverError`;
* hypothesis: for random batches, valid and corrupted, `FlowGraph.apply`, the solver and
  `LiveIds` (the network-free check for `RacingSolver`) give the same verdict and message; a
  refused batch changes nothing anywhere, an accepted one solves like a fresh solver.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmament_py.flow.changes import ROW_WIDTH, ChangeBatch, ChangeOp
from firmament_py.flow.graph import MAX_CAPACITY, MAX_COST, MAX_ID, FlowGraph, FlowGraphError
from firmament_py.solvers import BatchError, SolverError
from firmament_py.solvers.base import FlowSolver, InfeasibleError
from firmament_py.solvers.batch_check import LiveIds
from firmament_py.solvers.cost_scaling import CostScalingSolver
from firmament_py.solvers.ssp import SuccessiveShortestPathSolver

from .conftest import GraphSpec, graph_specs, graph_state

RN, RA, AN, SS, AA, CA = (int(op) for op in ChangeOp)  # the operations, in batch order


def row(op: int, ident: int, *fields: int) -> list[int]:
    """One change row; `fields` fill the columns after the id (see flow/changes.py)."""
    out = [op, ident, *fields]
    return out + [0] * (ROW_WIDTH - len(out))


def arc_row(op: int, ident: int, src: int, dst: int, low: int, cap: int, cost: int) -> list[int]:
    return row(op, ident, src, dst, low, cap, cost, 0, cost)


def batch(*rows: list[int]) -> ChangeBatch:
    table = np.array(rows, dtype=np.int64).reshape(-1, ROW_WIDTH)
    return ChangeBatch(table, counts={"rows": len(rows)})  # counts: unknown ops allowed


def small_graph() -> FlowGraph:
    """Nodes 1 (supply 2) .. 4 (supply -2); arcs 0: 1->2, 1: 2->4, 2: 1->3, 3: 3->4."""
    g = FlowGraph()
    g.add_nodes(4, supply=[2, 0, 0, -2])
    g.add_arc(1, 2, capacity=2, cost=1)
    g.add_arc(2, 4, capacity=2, cost=1)
    g.add_arc(1, 3, capacity=1, cost=0)
    g.add_arc(3, 4, capacity=1, cost=5)
    return g


def network_state(solver: FlowSolver) -> dict[str, list[int]]:
    return {name: np.asarray(a).tolist() for name, a in solver.network.arrays._asdict().items()}


SOLVERS = {"ssp": SuccessiveShortestPathSolver, "cost-scaling": CostScalingSolver}

BAD_BATCHES: list[tuple[str, ChangeBatch, str]] = [
    # The two the audit found: a crash, and a wrapped-around id that overwrote node 4.
    (
        "remove missing arc",
        batch(row(RA, 10**6)),
        r"row 0 \(remove_arc, arc 1000000\): arc 1000000 does not exist",
    ),
    (
        "add negative node",
        batch(row(AN, -1, 5)),
        r"row 0 \(add_node, node -1\): node id -1 is not within",
    ),
    (
        "remove negative arc",
        batch(row(RA, -3)),
        r"row 0 \(remove_arc, arc -3\): arc id -3 is not within",
    ),
    ("node id too large", batch(row(AN, MAX_ID, 0)), f"node id {MAX_ID} is not within"),
    (
        "arc id too large",
        batch(arc_row(AA, MAX_ID, 1, 2, 0, 1, 0)),
        f"arc id {MAX_ID} is not within",
    ),
    (
        "unknown operation",
        batch(row(9, 1)),
        r"row 0 \(operation code 9\): unknown operation code 9",
    ),
    ("operation zero", batch(row(RN, 2), row(0, 1)), r"row 1 \(operation code 0\)"),
    (
        "remove missing node",
        batch(row(RN, 7)),
        r"row 0 \(remove_node, node 7\): node 7 does not exist",
    ),
    (
        "remove node twice",
        batch(row(RN, 3), row(RN, 3)),
        r"row 1 \(remove_node, node 3\): node 3 does not exist \(see row 0",
    ),
    (
        "add existing node",
        batch(row(AN, 4, 0)),
        r"row 0 \(add_node, node 4\): node 4 already exists",
    ),
    (
        "add node twice",
        batch(row(AN, 6, 0), row(AN, 6, 0)),
        r"row 1 \(add_node, node 6\): node 6 already exists \(see row 0",
    ),
    ("node kind", batch(row(AN, 6, 0, 9)), "unknown node kind 9"),
    ("supply too large", batch(row(AN, 6, MAX_CAPACITY + 1)), "supply"),
    ("supply int64 min", batch(row(SS, 1, -(2**63))), "supply"),
    (
        "supply of missing node",
        batch(row(SS, 9, 1)),
        r"row 0 \(set_supply, node 9\): node 9 does not exist",
    ),
    (
        "supply of removed node",
        batch(row(RN, 3), row(SS, 3, 1)),
        r"row 1 \(set_supply, node 3\): node 3 does not exist",
    ),
    (
        "supply twice",
        batch(row(SS, 2, 1), row(SS, 2, -1)),
        r"row 1 \(set_supply, node 2\): node 2 appears twice",
    ),
    (
        "arc to missing node",
        batch(arc_row(AA, 4, 1, 9, 0, 1, 0)),
        r"row 0 \(add_arc, arc 4\): arc destination 9 does not exist",
    ),
    (
        "arc from removed node",
        batch(row(RN, 2), arc_row(AA, 4, 2, 4, 0, 1, 0)),
        r"row 1 \(add_arc, arc 4\): arc source 2 does not exist \(see row 0",
    ),
    ("arc end zero", batch(arc_row(AA, 4, 0, 1, 0, 1, 0)), "arc end 0 is not a node id"),
    ("self-loop", batch(arc_row(AA, 4, 2, 2, 0, 1, 0)), "self-loop on node 2"),
    (
        "arc id in use",
        batch(arc_row(AA, 1, 1, 4, 0, 1, 0)),
        r"row 0 \(add_arc, arc 1\): arc id 1 is already in use",
    ),
    (
        "arc added twice",
        batch(arc_row(AA, 5, 1, 4, 0, 1, 0), arc_row(AA, 5, 1, 4, 0, 1, 0)),
        r"row 1 \(add_arc, arc 5\): arc id 5 is already in use",
    ),
    ("negative lower", batch(arc_row(AA, 4, 1, 4, -1, 1, 0)), "lower bound -1"),
    ("lower above capacity", batch(arc_row(AA, 4, 1, 4, 3, 1, 0)), "lower bound 3 is not within"),
    ("capacity too large", batch(arc_row(AA, 4, 1, 4, 0, MAX_CAPACITY + 1, 0)), "capacity"),
    ("cost too large", batch(arc_row(CA, 0, 1, 2, 0, 1, MAX_COST + 1)), "cost"),
    ("cost int64 min", batch(arc_row(AA, 4, 1, 4, 0, 1, -(2**63))), "cost"),
    ("arc kind", batch(row(AA, 4, 1, 4, 0, 1, 0, 300, 0)), "kind 300"),
    ("old cost", batch(row(CA, 0, 1, 2, 0, 1, 0, 0, 2**40)), "old cost"),
    (
        "change missing arc",
        batch(arc_row(CA, 9, 1, 2, 0, 1, 0)),
        r"row 0 \(change_arc, arc 9\): arc 9 does not exist",
    ),
    (
        "change removed arc",
        batch(row(RA, 0), arc_row(CA, 0, 1, 2, 0, 1, 0)),
        r"row 1 \(change_arc, arc 0\): arc 0 does not exist \(see row 0",
    ),
    (
        "change arc twice",
        batch(arc_row(CA, 0, 1, 2, 0, 1, 3), arc_row(CA, 0, 1, 2, 0, 1, 4)),
        "arc 0 appears twice among the change_arc rows",
    ),
    (
        "change other ends",
        batch(arc_row(CA, 0, 1, 3, 0, 1, 0)),
        r"arc 0 joins other nodes than the batch says \(1->2, not 1->3\)",
    ),
    # Removing a node removes its arcs: their ids are gone for the rest of the batch.
    (
        "remove arc of removed node",
        batch(row(RN, 3), row(RA, 3)),
        r"row 1 \(remove_arc, arc 3\): arc 3 does not exist \(see row 0, remove_node\)",
    ),
    (
        "change arc of removed node",
        batch(row(RN, 4), arc_row(CA, 1, 2, 4, 0, 1, 0)),
        r"row 1 \(change_arc, arc 1\): arc 1 does not exist",
    ),
    (
        "out of order",
        batch(row(AN, 6, 0), row(RN, 3)),
        r"row 1 \(remove_node, node 3\): comes after row 0 \(add_node\), but .* must be ordered",
    ),
]


@pytest.mark.parametrize("name", sorted(SOLVERS))
@pytest.mark.parametrize(
    ("bad", "message"), [c[1:] for c in BAD_BATCHES], ids=[c[0] for c in BAD_BATCHES]
)
def test_a_bad_batch_is_refused_and_changes_nothing(
    name: str, bad: ChangeBatch, message: str
) -> None:
    g = small_graph()
    solver = SOLVERS[name]()
    expected = solver.solve_graph(g).cost
    before = network_state(solver)
    with pytest.raises(BatchError, match=message):
        solver.apply(bad)
    assert network_state(solver) == before  # cost scaling's pre-batch refine did not run either
    assert solver.solve().cost == expected
    # The graph refuses the same batch with the same message, and keeps its state too.
    state = graph_state(g)
    with pytest.raises(FlowGraphError, match=message):
        g.apply(bad)
    assert graph_state(g) == state


def test_tricky_but_legal_batches_are_applied() -> None:
    g = small_graph()
    solver = SuccessiveShortestPathSolver()
    solver.solve_graph(g)
    tricky = batch(
        row(RN, 3),  # takes arcs 2 and 3 with it...
        row(AN, 3, 1, 1),  # ...the id comes back as a new node...
        row(AN, 5, 0),
        row(SS, 4, -3),
        arc_row(AA, 2, 3, 5, 0, 1, 2),  # ...arc ids 2 and 3 are free again
        arc_row(AA, 3, 5, 4, 0, 2, 1),
        arc_row(AA, 6, 1, 5, 0, 1, 7),
        arc_row(CA, 6, 1, 5, 0, 1, 4),  # an arc added and changed in one batch
        arc_row(CA, 0, 1, 2, 0, 1, 1),
    )
    mirror = g.copy()
    mirror.apply(tricky)
    solver.apply(tricky)
    solver.network.check()
    result = solver.solve()
    assert result.cost == SuccessiveShortestPathSolver().solve_graph(mirror).cost == 10


def test_load_refuses_bad_snapshots_and_keeps_the_old_network() -> None:
    g = small_graph()
    solver = SuccessiveShortestPathSolver()
    expected = solver.solve_graph(g).cost
    before = network_state(solver)
    snap = g.snapshot()
    dangling = snap.rows.copy()
    dangling[-1, 3] = 9  # arc 3 now ends at a node the snapshot does not add
    duplicate = np.concatenate([snap.rows, snap.rows[:1]])
    with_removal = np.concatenate([snap.rows, np.array([row(RA, 0)], dtype=np.int64)])
    cases = [
        (ChangeBatch(dangling, reset=True), "arc destination 9 is not among the nodes"),
        (ChangeBatch(duplicate, reset=True), "row 8 .add_node, node 1.: the id is taken by row 0"),
        (ChangeBatch(with_removal, reset=True), "only add_node and add_arc rows"),
        (ChangeBatch(snap.rows), "must be a reset batch"),
    ]
    for bad, message in cases:
        with pytest.raises(BatchError, match=message):
            solver.load(bad)
        assert network_state(solver) == before
    assert solver.solve().cost == expected


def test_a_cost_beyond_64_bits_is_a_solver_error() -> None:
    g = FlowGraph()
    a, b = g.add_node(MAX_CAPACITY), g.add_node(-MAX_CAPACITY)
    g.add_arc(a, b, capacity=MAX_CAPACITY, cost=MAX_COST)
    with pytest.raises(SolverError, match="does not fit in 64 bits"):
        SuccessiveShortestPathSolver().solve_graph(g)


def test_live_ids_follow_node_removals_without_listing_arcs() -> None:
    g = small_graph()
    ids = LiveIds()
    ids.load(g.snapshot())
    g.discard_changes()
    g.remove_node(3)  # arcs 2 and 3 go with it; the batch lists only the node
    g.add_node(0, node=3)
    ids.apply(g.take_changes())
    for bad in (batch(row(RA, 2)), batch(arc_row(CA, 3, 3, 4, 0, 1, 5))):
        with pytest.raises(BatchError, match="does not exist"):
            ids.apply(bad)
    ids.apply(batch(arc_row(AA, 2, 3, 4, 0, 1, 0)))  # the freed id can be reused
    with pytest.raises(BatchError, match="already in use"):
        ids.apply(batch(arc_row(AA, 2, 1, 4, 0, 1, 0)))


def test_live_ids_record_a_snapshot_in_any_row_order_alike() -> None:
    # `_record` goes row by row: a snapshot whose rows come in another order than
    # `FlowGraph.snapshot` writes (arcs before nodes) must leave the same ids, ages and ends.
    g = small_graph()
    g.remove_arc(1)  # a hole in the arc ids
    snapshot = g.snapshot()
    g.discard_changes()
    shuffled = ChangeBatch(snapshot.rows[::-1].copy(), reset=True)
    ordered, reversed_ = LiveIds(), LiveIds()
    ordered.load(snapshot)
    reversed_.load(shuffled)
    for name in ("_node_alive", "_node_born", "_arc_born", "_src", "_dst"):
        np.testing.assert_array_equal(getattr(ordered, name), getattr(reversed_, name))
    assert reversed_._arc_born[1] == -1 and reversed_._arc_born[2] == 1
    assert (reversed_._src[2], reversed_._dst[2]) == (1, 3)
    g.remove_node(3)
    removal = g.take_changes()
    for ids in (ordered, reversed_):
        ids.apply(removal)
        with pytest.raises(BatchError, match="does not exist"):
            ids.apply(batch(row(RA, 2)))  # arc 2 went with node 3


# ---------------------------------------------------------------------- random batches

INTERESTING = st.sampled_from([-(2**63), -1, 0, 1, 2, 3, 5, 9, MAX_ID, MAX_CAPACITY + 1, 2**40])


@st.composite
def batches_for(draw: st.DrawFn, graph: FlowGraph) -> ChangeBatch:
    """A batch for `graph`: its own changes after random edits, then perhaps corrupted."""
    other = graph.copy()
    nodes = other.node_ids().tolist()
    for _ in range(draw(st.integers(0, 6))):
        what = draw(st.sampled_from(["add_node", "remove_node", "arc", "change", "remove_arc"]))
        arcs = other.arc_ids().tolist()
        nodes = other.node_ids().tolist()
        if what == "add_node":
            other.add_node(draw(st.integers(-2, 2)))
        elif what == "remove_node" and nodes:
            other.remove_node(draw(st.sampled_from(nodes)))
        elif what == "arc" and len(nodes) >= 2:
            u, v = draw(st.lists(st.sampled_from(nodes), min_size=2, max_size=2, unique=True))
            other.add_arc(u, v, capacity=draw(st.integers(0, 3)), cost=draw(st.integers(-4, 4)))
        elif what == "change" and arcs:
            other.change_arc(draw(st.sampled_from(arcs)), cost=draw(st.integers(-4, 4)))
        elif what == "remove_arc" and arcs:
            other.remove_arc(draw(st.sampled_from(arcs)))
    rows = other.take_changes().rows.copy()
    for _ in range(draw(st.integers(0, 2))):
        how = draw(st.sampled_from(["cell", "drop", "repeat", "swap", "random row"]))
        if how == "random row" or len(rows) == 0:
            extra = [draw(st.integers(1, 6)), draw(st.integers(-1, 8))]
            extra += [draw(st.integers(0, 6)) for _ in range(ROW_WIDTH - 2)]
            at = draw(st.integers(0, len(rows)))
            rows = np.insert(rows, at, np.array(extra, dtype=np.int64), axis=0)
            continue
        i = draw(st.integers(0, len(rows) - 1))
        if how == "cell":
            col = draw(st.integers(1, ROW_WIDTH - 1))
            rows[i, col] = draw(st.one_of(INTERESTING, st.integers(-2, 9)))
        elif how == "drop":
            rows = np.delete(rows, i, axis=0)
        elif how == "repeat":
            rows = np.insert(rows, i, rows[i], axis=0)
        else:
            j = draw(st.integers(0, len(rows) - 1))
            rows[[i, j]] = rows[[j, i]]
    return ChangeBatch(rows)


def _outcome(solver: FlowSolver) -> int | None:
    try:
        return solver.solve().cost
    except InfeasibleError:
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=graph_specs(max_nodes=6, max_arcs=10), data=st.data())
def test_graph_solver_and_live_ids_agree_on_random_batches(
    spec: GraphSpec, data: st.DataObject
) -> None:
    g = spec.build()  # with pending changes, so a refused batch has a change log to spoil
    twin = spec.build()
    solver = SuccessiveShortestPathSolver()
    solver.load(g.snapshot())
    ids = LiveIds()
    ids.load(g.snapshot())
    bad = data.draw(batches_for(g))
    before = network_state(solver)
    verdicts = []
    for take in (g.apply, solver.apply, ids.apply):
        try:
            take(bad)
            verdicts.append("ok")
        except ValueError as exc:  # FlowGraphError, BatchError
            verdicts.append(str(exc))
    assert verdicts[0] == verdicts[1] == verdicts[2]
    if verdicts[0] != "ok":
        assert graph_state(g) == graph_state(twin)
        assert np.array_equal(g.take_changes().rows, twin.take_changes().rows)
        assert network_state(solver) == before
        return
    solver.network.check()
    fresh = SuccessiveShortestPathSolver()
    fresh.load(g.snapshot())
    assert _outcome(solver) == _outcome(fresh)
