"""`reconcile`: the arcs out of a set of nodes made exactly what a pass wants, in bulk, with
only real changes reaching the graph's change log."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from firmament_py.flow.graph import FlowGraph, NodeKind
from firmament_py.scheduler.arc_edits import ArcRows, reconcile

Arc = tuple[int, int, int, int, int, int]  # source, target, type, lower, capacity, cost


def out_arcs(graph: FlowGraph, sources: list[int]) -> set[Arc]:
    arrays = graph.arrays()
    return {
        (
            int(arrays.src[k]),
            int(arrays.dst[k]),
            int(arrays.arc_kind[k]),
            int(arrays.low[k]),
            int(arrays.cap[k]),
            int(arrays.cost[k]),
        )
        for k in graph.arc_ids().tolist()
        if int(arrays.src[k]) in sources
    }


def graph_of(nodes: int) -> FlowGraph:
    graph = FlowGraph()
    for _ in range(nodes):
        graph.add_node(0, NodeKind.OTHER)
    return graph


def test_an_unchanged_answer_changes_nothing() -> None:
    graph = graph_of(4)
    graph.add_arc(1, 2, capacity=3, cost=5, kind=4)
    graph.add_arc(1, 3, capacity=1, cost=0, kind=5)
    graph.take_changes()
    wanted = ArcRows()
    wanted.add(1, 3, 5, 0, 1, 0)
    wanted.add_many(1, 2, 4, 0, 3, 5)
    reconcile(graph, graph.node_ids()[:1], wanted)
    assert graph.pending_changes == 0 and graph.num_arcs == 2


def test_arcs_are_keyed_by_target_and_type() -> None:
    graph = graph_of(4)
    kept = graph.add_arc(1, 2, capacity=3, cost=5, kind=4)
    graph.add_arc(1, 2, capacity=1, cost=0, kind=5)  # same target, other type: removed
    other = graph.add_arc(3, 2, capacity=1, cost=9, kind=4)  # not a source: untouched
    wanted = ArcRows()
    wanted.add(1, 2, 4, 0, 7, 1)  # the type-4 arc, changed
    wanted.add(1, 4, 5, 0, 1, 2)  # a new one
    reconcile(graph, graph.node_ids()[:1], wanted)
    assert out_arcs(graph, [1]) == {(1, 2, 4, 0, 7, 1), (1, 4, 5, 0, 1, 2)}
    assert graph.arc_capacity(kept) == 7  # changed in place, not removed and added
    assert graph.arc_cost(other) == 9


arcs_strategy = st.lists(
    st.tuples(
        st.integers(1, 5),
        st.integers(1, 6),
        st.integers(0, 3),
        st.integers(0, 9),
        st.integers(-9, 9),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(before=arcs_strategy, after=arcs_strategy, sources=st.sets(st.integers(1, 5), min_size=1))
def test_reconcile_makes_the_sources_arcs_exactly_the_wanted_ones(
    before: list[tuple[int, int, int, int, int]],
    after: list[tuple[int, int, int, int, int]],
    sources: set[int],
) -> None:
    graph = graph_of(6)
    seen: set[tuple[int, int, int]] = set()
    for src, dst, kind, cap, cost in before:
        if src != dst and (src, dst, kind) not in seen:
            seen.add((src, dst, kind))
            graph.add_arc(src, dst, capacity=cap, cost=cost, kind=kind)
    untouched = out_arcs(graph, [v for v in range(1, 7) if v not in sources])
    graph.take_changes()
    old = graph.copy()
    wanted = ArcRows()
    expected: dict[tuple[int, int, int], Arc] = {}
    for src, dst, kind, cap, cost in after:
        if src in sources and src != dst and (src, dst, kind) not in expected:
            expected[(src, dst, kind)] = (src, dst, kind, 0, cap, cost)
            wanted.add(src, dst, kind, 0, cap, cost)
    reconcile(graph, graph.node_ids()[[v - 1 for v in sorted(sources)]], wanted)
    assert out_arcs(graph, sorted(sources)) == set(expected.values())
    assert out_arcs(graph, [v for v in range(1, 7) if v not in sources]) == untouched
    # The change log says it all: replayed on a copy of the old graph, it gives the new one.
    old.apply(graph.take_changes())
    assert out_arcs(old, list(range(1, 7))) == out_arcs(graph, list(range(1, 7)))
