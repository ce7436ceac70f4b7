"""The flow graph's trusted calls (no argument checks, for the graph manager) against the
checked public ones: the same random sequence of mutations makes the same graph, the same
`take_changes()` batches and the same ids either way."""

from __future__ import annotations

import itertools
import pickle
import random

import numpy as np
import pytest

from firmament_py.flow.graph import FlowGraph, FlowGraphError, NodeKind


def _values(graph: FlowGraph, arc: int) -> tuple[int, int, int]:
    return graph.arc_lower(arc), graph.arc_capacity(arc), graph.arc_cost(arc)


def _replay(seed: int, trusted: bool) -> tuple[list[object], FlowGraph]:
    rng = random.Random(seed)
    graph = FlowGraph(node_hint=2, arc_hint=2)  # small, so the arrays (and views) grow
    nodes: list[int] = []
    trace: list[object] = []
    for step in range(1500):
        roll = rng.random()
        if roll < 0.25 or len(nodes) < 3:
            supply, kind = rng.randrange(-3, 4), rng.choice(list(NodeKind))
            add_node = graph.trusted_add_node if trusted else graph.add_node
            node = add_node(supply, kind)
            nodes.append(node)
            trace.append(("node", node))
        elif roll < 0.35:
            node = nodes.pop(rng.randrange(len(nodes)))
            if trusted:
                graph.trusted_remove_node(node)
            else:
                graph.remove_node(node)
        elif roll < 0.65:
            u, v = rng.sample(nodes, 2)
            low = rng.randrange(2)
            cap, cost, kind = low + rng.randrange(5), rng.randrange(-9, 10), rng.randrange(9)
            if trusted:
                arc = graph.trusted_add_arc(u, v, low, cap, cost, kind)
            else:
                arc = graph.add_arc(u, v, lower=low, capacity=cap, cost=cost, kind=kind)
            trace.append(("arc", arc))
        else:
            node = rng.choice(nodes)
            rows = graph.trusted_out_arcs(node)
            checked = [
                (a, graph.arc_dst(a), graph.arc_kind(a), *_values(graph, a))
                for a in graph.out_arcs(node)
            ]
            assert rows == checked
            if not rows:
                continue
            arc = rng.choice(rows)[0]
            if roll < 0.8:
                if trusted:
                    graph.trusted_remove_arc(arc)
                else:
                    graph.remove_arc(arc)
            else:
                cap = rng.randrange(4)
                low, cost = min(rng.randrange(2), cap), rng.randrange(-3, 4)
                if trusted:
                    graph.trusted_change_arc(arc, low, cap, cost)
                else:
                    graph.change_arc(arc, lower=low, capacity=cap, cost=cost)
        if step % 97 == 0:
            batch = graph.take_changes()
            trace.append(("batch", batch.rows.tobytes(), batch.raw_changes))
    batch = graph.take_changes()
    trace.append(("batch", batch.rows.tobytes(), batch.raw_changes))
    trace.append(("snapshot", graph.snapshot().rows.tobytes()))
    trace.append(("degrees", [graph.trusted_in_degree(v) for v in nodes]))
    return trace, graph


@pytest.mark.parametrize("seed", range(6))
def test_trusted_and_checked_calls_make_the_same_graph_and_changes(seed: int) -> None:
    trusted, graph = _replay(seed, trusted=True)
    checked, _ = _replay(seed, trusted=False)
    assert trusted == checked
    # The batches replay onto a copy, which then describes the same graph.
    assert np.array_equal(graph.copy().snapshot().rows, graph.snapshot().rows)


def test_trusted_add_arc_still_refuses_a_self_loop() -> None:
    graph = FlowGraph()
    node = graph.trusted_add_node(0, NodeKind.OTHER)
    with pytest.raises(FlowGraphError, match="self-loop"):
        graph.trusted_add_arc(node, node, 0, 1, 0, 0)
    assert graph.num_arcs == 0
    assert len(graph.take_changes()) == 1  # the node only


def test_a_graph_pickles_and_keeps_working_after_its_arrays_grew() -> None:
    graph = FlowGraph(node_hint=1, arc_hint=1)
    nodes = [graph.add_node(0) for _ in range(40)]
    for u, v in itertools.pairwise(nodes):
        graph.add_arc(u, v, capacity=2, cost=1)
    graph.discard_changes()
    other = pickle.loads(pickle.dumps(graph))
    for g in (graph, other):
        g.change_arc(g.out_arcs(nodes[0])[0], cost=5)
        g.remove_node(nodes[5])
        g.add_arc(nodes[1], nodes[7], capacity=1, cost=-2)
    assert np.array_equal(graph.snapshot().rows, other.snapshot().rows)
    assert np.array_equal(graph.take_changes().rows, other.take_changes().rows)


def test_bulk_calls_take_the_ids_single_calls_would() -> None:
    """Freed ids first, last freed first, skipping ids the free list holds twice or that were
    claimed by number since; then ids above the top."""

    def graph_with_a_messy_free_list() -> FlowGraph:
        graph = FlowGraph()
        nodes = [graph.add_node(0) for _ in range(4)]
        for u, v in itertools.pairwise(nodes):
            graph.add_arc(u, v, capacity=1, cost=0)
        graph.remove_node(nodes[1])  # node 2 free, arcs 0 and 1 free
        graph.add_node(0, node=nodes[1])  # claimed by number: still on the free list
        graph.add_arc(nodes[0], nodes[1], capacity=1, cost=0, arc=1)
        graph.remove_node(nodes[1])  # freed again: on the list twice
        graph.remove_node(nodes[2])
        return graph

    single, bulk = graph_with_a_messy_free_list(), graph_with_a_messy_free_list()
    expected = [single.trusted_add_node(1, NodeKind.TASK) for _ in range(3)]
    got = bulk.trusted_add_nodes(
        np.ones(3, dtype=np.int64), np.full(3, NodeKind.TASK, dtype=np.int64)
    )
    assert got.tolist() == expected == [3, 2, 5]
    ends = [(expected[0], 1), (expected[1], 1), (expected[2], 4), (4, expected[0])]
    arcs = [single.trusted_add_arc(u, v, 0, 1, 0, 0) for u, v in ends]
    columns = np.array([(u, v, 0, 1, 0, 0) for u, v in ends], dtype=np.int64).T.copy()
    assert bulk.trusted_add_arcs(*columns).tolist() == arcs
    assert np.array_equal(bulk.snapshot().rows, single.snapshot().rows)
    assert np.array_equal(bulk.take_changes().rows, single.take_changes().rows)
