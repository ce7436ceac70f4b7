"""Tests of DIMACS input and output (firmament_py/flow/dimacs.py).

Covered:

* reading a whole problem: comments, blank lines, optional node and arc types, nodes without an
  `n` line, ids no line mentions staying free;
* Firmament's incremental rounds on one graph: `n id supply type`, `a src dst low cap cost type`,
  `x src dst low cap cost type old_cost` (a change; low = cap = 0 removes the arc), `r id`, our
  `e id supply`, rounds ended by `c EOI` or the end of the stream, empty rounds, the sink
  rebalanced after a round;
* round trips (hypothesis): `write_dimacs` -> `read_dimacs` gives the same live nodes (same ids,
  supplies, types) and the same arcs; a stream of `write_dimacs_changes` rounds read back equals
  the graph after every round; `write_flows` output;
* malformed input, first round and later rounds: bad tokens, unknown line types, wrong field
  counts, bad problem lines, unknown nodes, arcs to removed nodes, ambiguous `x` lines... each
  raises `DimacsError` naming the right line, and a round with an error is not half-applied
  (the graph stays as the previous round left it).
"""

from __future__ import annotations

import io
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmament_py.flow.dimacs import (
    DimacsError,
    DimacsReader,
    balance_sink,
    decode_lines,
    read_dimacs,
    write_dimacs,
    write_dimacs_changes,
    write_flows,
)
from firmament_py.flow.graph import MAX_ID, FlowGraph, NodeKind

from .conftest import GraphSpec, graph_specs, graph_state

BASE = """\
c a small problem
p min 4 3
n 1 2 1
n 2 0
n 4 -2 3
a 1 2 0 5 3
a 2 4 1 5 -2 4
a 1 4 0 1 9 0
c EOI
"""
BASE_LINES = BASE.count("\n")


def state(graph: FlowGraph) -> dict[str, object]:
    return graph_state(graph, arc_ids=False)


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def dump(graph: FlowGraph) -> str:
    out = io.StringIO()
    write_dimacs(graph, out)
    return out.getvalue()


def read_rounds(text: str) -> list[dict[str, object]]:
    reader = DimacsReader(io.StringIO(text))
    return [state(g) for g in reader.rounds()]


# ====================================================================== reading


def test_read_a_whole_problem() -> None:
    g = read_dimacs(io.StringIO(BASE))
    assert g.node_ids().tolist() == [1, 2, 4]  # node 3 is not mentioned: its id stays free
    assert g.node_id_bound == 5
    assert [g.supply(v) for v in (1, 2, 4)] == [2, 0, -2]
    assert [g.node_kind(v) for v in (1, 2, 4)] == [NodeKind.TASK, NodeKind.OTHER, NodeKind.SINK]
    assert list(g.iter_arcs()) == [(0, 1, 2, 0, 5, 3), (1, 2, 4, 1, 5, -2), (2, 1, 4, 0, 1, 9)]
    assert [g.arc_kind(k) for k in range(3)] == [0, 4, 0]
    assert g.pending_changes == 0


def test_nodes_without_n_lines_have_zero_supply_and_type() -> None:
    text = "p min 3 2\n\n   \nc comment\na 1 2 0 1 1\na 2 3 0 1 1\n"
    g = read_dimacs(lines(text))
    assert g.node_ids().tolist() == [1, 2, 3]
    assert [g.supply(v) for v in (1, 2, 3)] == [0, 0, 0]
    assert g.node_kind(2) is NodeKind.OTHER


def test_crlf_line_ends_and_tabs() -> None:
    g = read_dimacs(lines("p min 2 1\r\nn 1 1\r\nn\t2\t-1\r\na 1 2 0 1 1\r\n"))
    assert list(g.iter_arcs()) == [(0, 1, 2, 0, 1, 1)]
    with pytest.raises(DimacsError) as info:
        read_dimacs(lines("p min 2 1\r\nn 1 1\r\na 1 2 0 1\r\n"))
    assert info.value.line == 3


def test_isolated_nodes_with_n_lines_survive() -> None:
    g = read_dimacs(lines("p min 3 0\nn 2 0\n"))
    assert g.node_ids().tolist() == [2]
    assert g.num_arcs == 0


def test_incremental_rounds() -> None:
    text = (
        BASE
        + "n 5 1 1\na 5 2 0 1 7 2\nc EOI\n"  # round 2: a task arrives (the sink rebalances)
        + "x 1 2 0 6 4 0 3\nx 1 4 0 0 9 0 9\nc EOI\n"  # round 3: change one arc, remove one
        + "c EOI\n"  # round 4: nothing
        + "r 5\ne 2 3\nn 3 0 2\na 3 4 0 2 0 0\n"  # round 5, ended by the end of the stream
    )
    reader = DimacsReader(io.StringIO(text))
    graphs = []
    seen = []
    for g in reader.rounds():
        graphs.append(g)
        seen.append(graph_state(g))
    assert len(seen) == 5
    assert reader.rounds_read == 5
    assert all(g is graphs[0] for g in graphs)
    assert seen[1]["nodes"] == {1: (2, 1), 2: (0, 0), 4: (-3, 3), 5: (1, 1)}
    assert (5, 2, 0, 1, 7, 2) in seen[1]["arcs"].values()  # type: ignore[attr-defined]
    arcs3 = sorted(seen[2]["arcs"].values())  # type: ignore[attr-defined]
    assert arcs3 == [(1, 2, 0, 6, 4, 0), (2, 4, 1, 5, -2, 4), (5, 2, 0, 1, 7, 2)]
    assert seen[3] == seen[2]
    # Round 5: node 5 and its arc are gone, node 2 supplies 3, node 3 is new; the sink balances.
    assert seen[4]["nodes"] == {1: (2, 1), 2: (3, 0), 3: (0, 2), 4: (-5, 3)}
    assert sorted(seen[4]["arcs"].values()) == [  # type: ignore[attr-defined]
        (1, 2, 0, 6, 4, 0),
        (2, 4, 1, 5, -2, 4),
        (3, 4, 0, 2, 0, 0),
    ]


def test_node_removed_and_readded_in_one_round() -> None:
    text = BASE + "r 2\nn 2 0 0\na 2 4 0 3 1 0\nx 2 4 0 4 1 0 1\nc EOI\n"
    *_, last = read_rounds(text)
    assert sorted(last["arcs"]) == [(1, 4, 0, 1, 9, 0), (2, 4, 0, 4, 1, 0)]  # type: ignore[arg-type]


def test_sink_supply_given_in_the_round_is_kept() -> None:
    text = BASE + "n 5 1 0\ne 4 -1\nc EOI\n"
    *_, last = read_rounds(text)
    assert last["nodes"] == {1: (2, 1), 2: (0, 0), 4: (-1, 3), 5: (1, 0)}


def test_balance_sink() -> None:
    g = read_dimacs(io.StringIO(BASE))
    g.set_supply(2, 4)
    assert balance_sink(g)
    assert g.supply(4) == -6
    g.add_node(0, NodeKind.SINK)
    assert not balance_sink(g)  # two sinks: nothing to decide


# ====================================================================== writing and round trips


def test_write_dimacs_format() -> None:
    g = read_dimacs(io.StringIO(BASE))
    assert dump(g) == (
        "p min 4 3\n"
        "n 1 2 1\nn 2 0 0\nn 4 -2 3\n"
        "a 1 2 0 5 3 0\na 2 4 1 5 -2 4\na 1 4 0 1 9 0\n"
        "c EOI\n"
    )


def test_write_flows_lists_positive_flows() -> None:
    import numpy as np

    g = read_dimacs(io.StringIO(BASE))
    out = io.StringIO()
    write_flows(g, np.array([2, 2, 0], dtype=np.int64), 2, out)
    assert out.getvalue() == "s 2\nf 1 2 2\nf 2 4 2\n"


@settings(max_examples=80, deadline=None)
@given(
    spec=graph_specs(max_nodes=12, max_arcs=25),
    node_kinds=st.lists(st.integers(0, 3)),
    arc_kinds=st.lists(st.integers(0, 100)),
)
def test_write_then_read_round_trips(
    spec: GraphSpec, node_kinds: list[int], arc_kinds: list[int]
) -> None:
    plain = spec.build()
    # The same graph with node and arc types (and the same ids).
    g = FlowGraph()
    for i, v in enumerate(plain.node_ids().tolist()):
        kind = node_kinds[i] if i < len(node_kinds) else 0
        g.add_node(plain.supply(v), kind, node=v)
    for i, (k, src, dst, low, cap, cost) in enumerate(plain.iter_arcs()):
        kind = arc_kinds[i] if i < len(arc_kinds) else 0
        g.add_arc(src, dst, lower=low, capacity=cap, cost=cost, kind=kind, arc=k)
    text = dump(g)
    back = read_dimacs(lines(text))
    assert state(back) == state(g)
    assert back.node_ids().tolist() == g.node_ids().tolist()
    assert back.pending_changes == 0
    assert dump(back) == text  # and it writes back the same way


def _random_round(data: st.DataObject, g: FlowGraph) -> None:
    """Mutate g the way Firmament's rounds can express (no parallel arcs)."""
    values = st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(-9, 9), st.integers(0, 5))
    for _ in range(data.draw(st.integers(0, 6))):
        live = g.node_ids().tolist()
        arcs = g.arc_ids().tolist()
        op = data.draw(st.sampled_from(["add_node", "remove_node", "supply", "add", "x", "rm"]))
        if op == "add_node" or not live:
            v = g.add_node(data.draw(st.integers(-3, 3)), data.draw(st.integers(0, 2)))
            live.append(v)
        elif op == "remove_node":
            g.remove_node(data.draw(st.sampled_from(live)))
        elif op == "supply":
            g.set_supply(data.draw(st.sampled_from(live)), data.draw(st.integers(-3, 3)))
        elif op == "add" and len(live) >= 2:
            u, v = data.draw(st.lists(st.sampled_from(live), min_size=2, max_size=2, unique=True))
            if not g.find_arcs(u, v):
                # Capacity may be 0: an arc removed and re-added with the same id and ends is
                # a change, possibly to [0, 0], which the writer must not lose.
                low, extra, cost, kind = data.draw(values)
                cap = low + extra
                g.add_arc(u, v, lower=low, capacity=cap, cost=cost, kind=kind)
        elif op == "x" and arcs:
            k = data.draw(st.sampled_from(arcs))
            low, extra, cost, kind = data.draw(values)
            g.change_arc(k, lower=low, capacity=low + extra, cost=cost, kind=kind)
        elif op == "rm" and arcs:
            g.remove_arc(data.draw(st.sampled_from(arcs)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=graph_specs(max_nodes=8, max_arcs=14), data=st.data())
def test_change_rounds_read_back_equal_the_graph(spec: GraphSpec, data: st.DataObject) -> None:
    g = spec.build()
    for k in g.arc_ids().tolist():  # Firmament's `x` lines cannot tell parallel arcs apart
        if g.has_arc(k) and len(g.find_arcs(g.arc_src(k), g.arc_dst(k))) > 1:
            g.remove_arc(k)
    g.discard_changes()
    out = io.StringIO()
    write_dimacs(g, out)
    expected = [state(g)]
    for _ in range(data.draw(st.integers(1, 5))):
        _random_round(data, g)
        write_dimacs_changes(g.take_changes(), out)
        expected.append(state(g))
    assert read_rounds(out.getvalue()) == expected


def test_change_rounds_with_a_sink_leave_its_supply_to_the_reader() -> None:
    g = read_dimacs(io.StringIO(BASE))
    sink = 4
    out = io.StringIO()
    write_dimacs(g, out)
    expected = [state(g)]
    v = g.add_node(3, NodeKind.TASK)
    g.add_arc(v, sink, capacity=3, cost=1)
    g.set_supply(sink, g.supply(sink) - 3)
    g.set_supply(1, 1)
    g.set_supply(sink, g.supply(sink) + 1)
    batch = g.take_changes()
    text = io.StringIO()
    write_dimacs_changes(batch, text, sink=sink)
    assert f"e {sink} " not in text.getvalue()
    assert "e 1 1\n" in text.getvalue()
    out.write(text.getvalue())
    expected.append(state(g))
    g.remove_node(v)
    g.set_supply(sink, g.supply(sink) + 3)
    write_dimacs_changes(g.take_changes(), out, sink=sink)
    expected.append(state(g))
    assert read_rounds(out.getvalue()) == expected


def test_write_dimacs_changes_format() -> None:
    g = read_dimacs(io.StringIO(BASE))
    g.remove_node(2)
    g.remove_arc(2)
    v = g.add_node(1, NodeKind.TASK)
    g.set_supply(1, 1)
    g.add_arc(v, 4, capacity=2, cost=5, kind=1)
    g.add_arc(1, v, capacity=2, cost=6, lower=1)
    out = io.StringIO()
    write_dimacs_changes(g.take_changes(), out)
    assert out.getvalue() == (
        "r 2\nx 1 4 0 0 9 0 9\nn 2 1 1\ne 1 1\na 1 2 1 2 6 0\na 2 4 0 2 5 1\nc EOI\n"
    )
    g.change_arc(2, cost=-1, capacity=4)
    out = io.StringIO()
    write_dimacs_changes(g.take_changes(), out)
    assert out.getvalue() == "x 2 4 0 4 -1 1 5\nc EOI\n"


def test_change_to_zero_capacity_and_back_round_trips() -> None:
    # `x u v 0 0` is a removal to Firmament; the writer re-adds the arc so it survives.
    g = read_dimacs(io.StringIO(BASE))
    out = io.StringIO()
    write_dimacs(g, out)
    expected = [state(g)]
    for cap in (0, 3):
        g.change_arc(0, capacity=cap)
        write_dimacs_changes(g.take_changes(), out)
        expected.append(state(g))
    assert read_rounds(out.getvalue()) == expected


# ====================================================================== malformed input

FIRST_ROUND_ERRORS: list[tuple[str, str, int, str]] = [
    ("no problem line", "c hello\nn 1 0\n", 2, "missing 'p min' line"),
    ("problem line max", "p max 2 0\n", 1, "must read 'p min NODES ARCS'"),
    ("problem line short", "p min 2\n", 1, "must read 'p min NODES ARCS'"),
    ("problem line long", "p min 2 0 0\n", 1, "must read 'p min NODES ARCS'"),
    ("problem line word", "p min two 0\n", 1, "non-integer"),
    ("problem line float", "p min 2 0.5\n", 1, "non-integer"),
    ("negative node count", "p min -1 0\n", 1, "non-negative"),
    ("second problem line", "p min 2 0\nn 1 0\np min 2 0\n", 3, "second 'p' line"),
    ("arc end too large", "p min 2 1\na 1 3 0 1 1\n", 2, "arc end 3 is outside 1..2"),
    ("arc end zero", "p min 2 1\na 0 2 0 1 1\n", 2, "arc end 0 is outside 1..2"),
    ("self-loop", "p min 2 1\n\na 2 2 0 1 1\n", 3, "self-loop on node 2"),
    ("arc short", "p min 2 1\na 1 2 0 1\n", 2, "'a' line needs 5 or 6 numbers"),
    ("arc long", "p min 2 1\na 1 2 0 1 1 0 0\n", 2, "'a' line needs 5 or 6 numbers"),
    ("arc bad token", "p min 2 1\na 1 2 0 1 x\n", 2, "non-integer field"),
    ("arc lower above cap", "p min 2 1\na 1 2 2 1 0\n", 2, "lower bound 2 is not within"),
    ("arc negative cap", "p min 2 1\na 1 2 0 -1 0\n", 2, "negative capacity -1"),
    ("arc cost too large", "p min 2 1\na 1 2 0 1 9999999999\n", 2, "cost 9999999999 exceeds"),
    ("node outside", "p min 2 0\nn 3 0\n", 2, "node 3 is outside 1..2"),
    ("node twice", "p min 2 0\nn 1 1\nn 1 -1\n", 3, "node 1 is described twice"),
    ("node type", "p min 2 0\nn 1 0 7\n", 2, "unknown node type 7"),
    ("node long", "p min 2 0\nn 1 0 0 5\n", 2, "'n' line needs 2 or 3 numbers"),
    ("node bad token", "p min 2 0\nn 1 1e3\n", 2, "non-integer field"),
    ("unbalanced", "p min 2 0\nn 1 1\n", 1, "supplies sum to 1, not 0"),
    ("arc count", "p min 2 2\na 1 2 0 1 0\n", 1, "declares 2 arcs, found 1"),
    ("unknown line", "p min 2 0\nq 1 2\n", 2, "unknown line type 'q'"),
    ("removal in first round", "p min 2 0\nr 1\n", 2, "only allowed after the first round"),
    ("change in first round", "p min 2 0\nx 1 2 0 1 0 0 0\n", 2, "only allowed after the first"),
]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [c[1:] for c in FIRST_ROUND_ERRORS],
    ids=[c[0] for c in FIRST_ROUND_ERRORS],
)
def test_malformed_first_round(text: str, line: int, message: str) -> None:
    with pytest.raises(DimacsError, match=message) as info:
        read_dimacs(io.StringIO(text))
    assert info.value.line == line
    assert str(info.value).startswith(f"line {line}: ")
    assert message.split()[0] in info.value.reason


@pytest.mark.parametrize("text", ["", "\n\n", "c nothing here\nc EOI\n"])
def test_empty_input(text: str) -> None:
    with pytest.raises(DimacsError, match=r"empty input|missing 'p min'"):
        read_dimacs(io.StringIO(text))


# Lines that would change the graph if applied, put in front of each bad line below.
PREFIX = "n 7 1 0\na 7 1 0 1 1 0\nx 1 2 0 3 2 0 3\nr 2\ne 1 5\n"
PREFIX_LINES = PREFIX.count("\n")

LATER_ROUND_ERRORS: list[tuple[str, str, str]] = [
    ("node exists", "n 4 0 0", "node 4 already exists"),
    ("node added twice", "n 7 0 0", "node 7 already exists"),
    ("node id zero", "n 0 0 0", "node ids start at 1"),
    ("node type", "n 6 0 8", "unknown node type 8"),
    ("node short", "n 6", "'n' line needs 2 or 3 numbers"),
    ("remove unknown", "r 9", "cannot remove node 9: it does not exist"),
    ("remove removed", "r 2", "cannot remove node 2: it does not exist"),
    ("remove long", "r 1 2", "'r' line needs 1 numbers"),
    ("arc to unknown node", "a 1 9 0 1 0 0", "arc end 9 does not exist"),
    ("arc to removed node", "a 1 2 0 1 0 0", "arc end 2 does not exist"),
    ("arc from removed node", "a 2 4 0 1 0 0", "arc end 2 does not exist"),
    ("arc self-loop", "a 1 1 0 1 0 0", "self-loop on node 1"),
    ("arc long", "a 1 4 0 1 0 0 9", "'a' line needs 5 or 6 numbers"),
    ("arc bad values", "a 1 4 3 1 0 0", "lower bound 3 is not within"),
    ("change short", "x 1 4 0 1 0 0", "'x' line needs 7 numbers"),
    ("change missing arc", "x 4 1 0 1 0 0 0", "no arc from 4 to 1 to change"),
    ("change arc of removed node", "x 2 4 0 1 0 0 0", "arc end 2 does not exist"),
    ("change removed arc", "x 1 4 0 0 9 0 9\nx 1 4 0 1 9 0 9", "no arc from 1 to 4 to change"),
    ("change ambiguous", "a 1 4 0 1 0 0\nx 1 4 0 2 0 0 0", "2 parallel arcs from 1 to 4"),
    ("change bad values", "x 1 4 0 -1 0 0 9", "negative capacity -1"),
    ("change bad token", "x 1 4 0 1 zero 0 9", "non-integer field"),
    ("supply of unknown node", "e 9 1", "node 9 does not exist"),
    ("supply of removed node", "e 2 1", "node 2 does not exist"),
    ("problem line", "p min 3 0", "'p' line after the first round"),
    ("unknown line", "z 1", "unknown line type 'z'"),
]


@pytest.mark.parametrize(
    ("bad", "message"), [c[1:] for c in LATER_ROUND_ERRORS], ids=[c[0] for c in LATER_ROUND_ERRORS]
)
def test_malformed_later_round_names_the_line_and_applies_nothing(bad: str, message: str) -> None:
    round2 = "n 5 1 2\na 5 4 0 1 3 0\nc EOI\n"
    text = BASE + round2 + PREFIX + bad + "\nn 8 0 0\nc EOI\nn 9 0 0\nc EOI\n"
    line = BASE_LINES + round2.count("\n") + PREFIX_LINES + bad.count("\n") + 1
    reader = DimacsReader(io.StringIO(text))
    rounds = reader.rounds()
    next(rounds)
    g = next(rounds)
    good = state(g)
    ids = (g.node_ids().tolist(), g.arc_ids().tolist(), g.node_id_bound, g.arc_id_bound)
    with pytest.raises(DimacsError, match=message) as info:
        next(rounds)
    assert info.value.line == line
    assert str(info.value).startswith(f"line {line}: ")
    assert reader.graph is g
    assert state(g) == good
    assert (g.node_ids().tolist(), g.arc_ids().tolist(), g.node_id_bound, g.arc_id_bound) == ids
    assert g.pending_changes == 2 + 1  # round 2's own changes (node, arc, sink), nothing more
    assert reader.rounds_read == 2


def test_change_of_an_arc_added_in_the_same_round_with_a_new_node() -> None:
    text = BASE + "n 5 1 1\na 5 2 0 1 0 0\nx 5 2 0 2 3 0 0\nc EOI\n"
    *_, last = read_rounds(text)
    assert (5, 2, 0, 2, 3, 0) in last["arcs"]  # type: ignore[operator]


BAD_VALUES_APPLIED_HALFWAY = [
    ("node supply too large", "n 5 5000000000000000 0", "supply"),
    ("set supply too large", "e 1 -5000000000000000", "supply"),
    ("arc type out of range", "a 2 1 0 1 0 300", "type|kind"),
]


@pytest.mark.parametrize(
    ("bad", "message"),
    [c[1:] for c in BAD_VALUES_APPLIED_HALFWAY],
    ids=[c[0] for c in BAD_VALUES_APPLIED_HALFWAY],
)
def test_out_of_range_values_in_a_later_round(bad: str, message: str) -> None:
    text = BASE + "a 2 1 0 1 0 0\n" + bad + "\nc EOI\n"
    reader = DimacsReader(io.StringIO(text))
    rounds = reader.rounds()
    g = next(rounds)
    good = state(g)
    with pytest.raises(DimacsError, match=message) as info:
        next(rounds)
    assert info.value.line == BASE_LINES + 2
    assert state(g) == good


def test_out_of_range_supply_in_the_first_round() -> None:
    text = "p min 2 0\nn 1 5000000000000000\nn 2 -5000000000000000\n"
    with pytest.raises(DimacsError) as info:
        read_dimacs(io.StringIO(text))
    assert info.value.line == 2


def test_absurd_node_count_in_the_problem_line() -> None:
    with pytest.raises(DimacsError) as info:
        read_dimacs(io.StringIO("p min 1000000000000000000000000000000 0\n"))
    assert info.value.line == 1


def test_error_in_a_later_round_after_good_rounds_keeps_the_last_good_graph() -> None:
    text = BASE + "n 5 1 0\nc EOI\n" + "a 5 4 0 1 0 0\nc EOI\n" + "r 5\nr 5\nc EOI\n"
    reader = DimacsReader(lines(text))
    seen = []
    with pytest.raises(DimacsError) as info:
        for g in reader.rounds():
            seen.append(state(g))
    assert len(seen) == 3
    assert info.value.line == BASE_LINES + 6
    assert reader.graph is not None
    assert state(reader.graph) == seen[-1]
    assert reader.graph.has_node(5)


# ====================================================================== size and encoding


def test_a_huge_declared_node_count_costs_only_what_the_lines_mention() -> None:
    # Building used to allocate arrays for every declared id and free the unmentioned ones one
    # by one in Python: for 10**8 ids, gigabytes and minutes.
    text = "p min 100000000 2\nn 1 1\nn 99 -1 3\na 1 7 0 1 2\na 7 99 0 1 3\n"
    tracemalloc.start()
    try:
        g = read_dimacs(lines(text))
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000
    assert g.node_ids().tolist() == [1, 7, 99]
    assert g.node_id_bound == 100  # ids above the largest mentioned one are not allocated
    assert g.add_node() == 2  # unmentioned ids below it are free
    with pytest.raises(DimacsError, match=f"below {MAX_ID}") as info:
        read_dimacs(lines(f"c too many\np min {MAX_ID} 0\n"))
    assert info.value.line == 2


def test_later_rounds_accept_n_and_a_lines_without_a_type() -> None:
    # Firmament always writes the type; docs/solvers.md documents that a missing one means 0.
    *_, last = DimacsReader(lines(BASE + "n 6 0\na 6 4 0 1 3\nc EOI\n")).rounds()
    assert last.node_kind(6) is NodeKind.OTHER
    (arc,) = last.find_arcs(6, 4)
    assert last.arc_kind(arc) == 0


def test_decode_lines_names_the_line_that_is_not_utf8() -> None:
    raw = [b"p min 2 1\n", b"n 1 1\n", b"n 2 -1 \xff\n", b"a 1 2 0 1 1\n"]
    with pytest.raises(DimacsError, match=r"not UTF-8 text \(byte 0xff at column 8\)") as info:
        read_dimacs(decode_lines(raw))
    assert info.value.line == 3
    g = read_dimacs(decode_lines([b"p min 2 1\r\n", b"n 1 1\n", b"n 2 -1\n", b"a 1 2 0 1 1"]))
    assert g.num_arcs == 1


def test_a_byte_order_mark_before_the_first_line_is_skipped() -> None:
    raw = [b"\xef\xbb\xbfp min 2 1\n", b"n 1 1\n", b"n 2 -1\n", b"a 1 2 0 1 1"]
    g = read_dimacs(decode_lines(raw))
    assert g.num_arcs == 1
    # Only there: anywhere else it is text the format does not know.
    with pytest.raises(DimacsError, match="unknown line type") as info:
        read_dimacs(decode_lines([b"p min 2 1\n", b"\xef\xbb\xbfn 1 1\n", b"n 2 -1\n"]))
    assert info.value.line == 2
