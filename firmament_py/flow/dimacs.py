"""DIMACS min-cost flow input and output, with Firmament's incremental extension.

A stream is a sequence of rounds, each ended by a `c EOI` comment (or the end of the stream).
The first round is a whole problem in DIMACS `min` format:

    p min NODES ARCS
    n ID SUPPLY [TYPE]           nodes not listed have supply 0 and type 0
    a SRC DST LOW CAP COST [TYPE]

Later rounds change the graph, as Firmament's scheduler writes them to its solver:

    n ID SUPPLY [TYPE]           add a node (the id must be free)
    r ID                         remove a node and its arcs
    a SRC DST LOW CAP COST [TYPE]
                                 add an arc
    x SRC DST LOW CAP COST TYPE OLD_COST
                                 change the arc from SRC to DST; LOW = CAP = 0 removes it
    e ID SUPPLY                  set a node's supply (our extension; Firmament never emits it)

Firmament always writes TYPE on `n` and `a` lines; we also accept it missing (type 0), in every
round, as plain DIMACS does.

After each later round the node of type 3 (the sink), if there is exactly one, takes the supply
that balances the graph: Firmament adjusts the sink's demand implicitly when tasks come and go.

Every error names the line. A round is parsed and checked completely before any of it is applied,
so a bad line leaves the graph exactly as the previous round left it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from firmament_py.flow.changes import (
    ARC_CAP,
    ARC_COST,
    ARC_DST,
    ARC_KIND,
    ARC_LOW,
    ARC_OLD_COST,
    ARC_SRC,
    COL_ID,
    COL_OP,
    NODE_KIND,
    NODE_SUPPLY,
    ChangeBatch,
    ChangeOp,
)
from firmament_py.flow.graph import FlowGraph
from firmament_py.flow.limits import (
    MAX_ARC_KIND,
    MAX_CAPACITY,
    MAX_ID,
    FlowGraphError,
    NodeKind,
    check_arc_values,
)


class DimacsError(ValueError):
    """Malformed DIMACS input; `line` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.reason = message


@dataclass(frozen=True)
class _Op:
    line: int
    kind: str
    args: tuple[int, ...]


def _ints(line_no: int, fields: list[str], lengths: Iterable[int], what: str) -> tuple[int, ...]:
    allowed = tuple(lengths)
    if len(fields) - 1 not in allowed:
        want = " or ".join(str(n) for n in allowed)
        raise DimacsError(line_no, f"'{fields[0]}' line needs {want} numbers ({what})")
    try:
        return tuple(int(f) for f in fields[1:])
    except ValueError:
        raise DimacsError(line_no, f"'{fields[0]}' line has a non-integer field") from None


class DimacsReader:
    """Reads a DIMACS stream round by round into one `FlowGraph`."""

    def __init__(self, stream: Iterable[str]) -> None:
        self._lines = iter(stream)
        self._line_no = 0
        self.graph: FlowGraph | None = None
        self.rounds_read = 0

    def rounds(self) -> Iterator[FlowGraph]:
        """Apply the rounds one at a time, yielding the graph after each."""
        while True:
            ops = self._next_round()
            if ops is None:
                return
            if self.graph is None:
                self.graph = self._build(ops)
            else:
                self._check_incremental(ops)
                self._apply_incremental(ops)
            self.rounds_read += 1
            yield self.graph

    # ------------------------------------------------------------------ tokenising

    def _next_round(self) -> list[_Op] | None:
        ops: list[_Op] = []
        saw_anything = False
        for raw in self._lines:
            self._line_no += 1
            fields = raw.split()
            if not fields:
                continue
            saw_anything = True
            tag = fields[0]
            if tag == "c":
                if len(fields) == 2 and fields[1] == "EOI":
                    return ops
                continue
            ops.append(self._parse(self._line_no, tag, fields))
        return ops if saw_anything and ops else None

    def _parse(self, n: int, tag: str, fields: list[str]) -> _Op:
        first = self.graph is None
        if tag == "p":
            if len(fields) != 4 or fields[1] != "min":
                raise DimacsError(n, "problem line must read 'p min NODES ARCS'")
            return _Op(n, "p", _ints(n, fields[1:], (2,), "nodes, arcs"))
        if tag == "n":
            return _Op(n, "n", _ints(n, fields, (2, 3), "id, supply, type"))
        if tag == "a":
            return _Op(n, "a", _ints(n, fields, (5, 6), "src, dst, low, cap, cost, type"))
        if not first:
            if tag == "r":
                return _Op(n, "r", _ints(n, fields, (1,), "id"))
            if tag == "x":
                return _Op(
                    n, "x", _ints(n, fields, (7,), "src, dst, low, cap, cost, type, old cost")
                )
            if tag == "e":
                return _Op(n, "e", _ints(n, fields, (2,), "id, supply"))
        elif tag in ("r", "x", "e"):
            raise DimacsError(n, f"'{tag}' lines are only allowed after the first round")
        raise DimacsError(n, f"unknown line type '{tag}'")

    # ------------------------------------------------------------------ first round

    def _build(self, ops: list[_Op]) -> FlowGraph:
        """The first round: a whole problem. Work follows the lines, not the declared count.

        Only ids that some line mentions become nodes; the others stay free (an isolated node of
        supply 0 carries nothing, and a graph written with gaps in its ids reads back with the
        same live nodes). So `p min 100000000 2` with two arcs builds a graph of a few nodes.
        """
        if not ops or ops[0].kind != "p":
            raise DimacsError(ops[0].line if ops else self._line_no, "missing 'p min' line")
        n_nodes, n_arcs = ops[0].args
        if n_nodes < 0 or n_arcs < 0:
            raise DimacsError(ops[0].line, "node and arc counts must be non-negative")
        if n_nodes >= MAX_ID or n_arcs >= MAX_ID:
            raise DimacsError(ops[0].line, f"node and arc counts must be below {MAX_ID}")
        described: dict[int, tuple[int, int]] = {}  # node -> (supply, kind), from 'n' lines
        arc_rows: list[tuple[int, ...]] = []
        for op in ops[1:]:
            if op.kind == "p":
                raise DimacsError(op.line, "second 'p' line")
            if op.kind == "n":
                node = op.args[0]
                if not 1 <= node <= n_nodes:
                    raise DimacsError(op.line, f"node {node} is outside 1..{n_nodes}")
                if node in described:
                    raise DimacsError(op.line, f"node {node} is described twice")
                kind = self._node_kind(op.line, op.args[2]) if len(op.args) == 3 else 0
                described[node] = (self._supply(op.line, op.args[1]), kind)
            else:
                src, dst, low, cap, cost = op.args[:5]
                for end in (src, dst):
                    if not 1 <= end <= n_nodes:
                        raise DimacsError(op.line, f"arc end {end} is outside 1..{n_nodes}")
                if src == dst:
                    raise DimacsError(op.line, f"self-loop on node {src}")
                self._check_values(op.line, low, cap, cost)
                kind = self._arc_kind(op.line, op.args[5]) if len(op.args) == 6 else 0
                arc_rows.append((src, dst, low, cap, cost, kind))
        if len(arc_rows) != n_arcs:
            raise DimacsError(
                ops[0].line, f"'p' line declares {n_arcs} arcs, found {len(arc_rows)}"
            )
        total = sum(supply for supply, _kind in described.values())  # exact: Python ints
        if total != 0:
            raise DimacsError(ops[0].line, f"supplies sum to {total}, not 0")
        table = np.asarray(arc_rows, dtype=np.int64).reshape(-1, 6)
        with_lines = np.fromiter(described, dtype=np.int64, count=len(described))
        nodes = np.unique(np.concatenate([with_lines, table[:, 0], table[:, 1]]))
        supplies = np.zeros(len(nodes), dtype=np.int64)
        kinds = np.zeros(len(nodes), dtype=np.int64)
        if described:
            at = np.searchsorted(nodes, with_lines)
            values = np.asarray(list(described.values()), dtype=np.int64)
            supplies[at] = values[:, 0]
            kinds[at] = values[:, 1]
        top = int(nodes[-1]) if len(nodes) else 0
        graph = FlowGraph(node_hint=top, arc_hint=max(1, n_arcs))
        graph.add_nodes_with_ids(nodes, supplies, kinds)
        if len(table):
            graph.add_arcs(
                table[:, 0],
                table[:, 1],
                lower=table[:, 2],
                capacity=table[:, 3],
                cost=table[:, 4],
                kind=table[:, 5],
            )
        graph.discard_changes()
        return graph

    # ------------------------------------------------------------------ later rounds

    def _check_incremental(self, ops: list[_Op]) -> None:
        """Check a whole round against the graph plus this round's own effects, applying nothing."""
        graph = self.graph
        assert graph is not None
        alive: dict[int, bool] = {}
        recreated: set[int] = set()
        pair_delta: dict[tuple[int, int], int] = defaultdict(int)

        def node_alive(v: int) -> bool:
            return alive[v] if v in alive else graph.has_node(v)

        def arcs_between(u: int, v: int) -> int:
            fresh = u in recreated or v in recreated or not graph.has_node(u)
            base = 0 if fresh or not graph.has_node(v) else len(graph.find_arcs(u, v))
            return base + pair_delta[(u, v)]

        for op in ops:
            if op.kind == "p":
                raise DimacsError(op.line, "'p' line after the first round")
            if op.kind == "n":
                node = op.args[0]
                if node <= 0:
                    raise DimacsError(op.line, f"node ids start at 1, got {node}")
                if node >= MAX_ID:
                    raise DimacsError(op.line, f"node id {node} exceeds the limit of {MAX_ID - 1}")
                self._supply(op.line, op.args[1])
                if node_alive(node):
                    raise DimacsError(op.line, f"node {node} already exists")
                if len(op.args) == 3:
                    self._node_kind(op.line, op.args[2])
                alive[node] = True
                recreated.add(node)  # a new node has no arcs but this round's
            elif op.kind == "r":
                node = op.args[0]
                if not node_alive(node):
                    raise DimacsError(op.line, f"cannot remove node {node}: it does not exist")
                alive[node] = False
                recreated.add(node)
                for pair in list(pair_delta):
                    if node in pair:
                        pair_delta[pair] = 0
            elif op.kind == "e":
                if not node_alive(op.args[0]):
                    raise DimacsError(op.line, f"node {op.args[0]} does not exist")
                self._supply(op.line, op.args[1])
            else:
                src, dst, low, cap, cost = op.args[:5]
                for end in (src, dst):
                    if not node_alive(end):
                        raise DimacsError(op.line, f"arc end {end} does not exist")
                if src == dst:
                    raise DimacsError(op.line, f"self-loop on node {src}")
                self._check_values(op.line, low, cap, cost)
                if len(op.args) >= 6:
                    self._arc_kind(op.line, op.args[5])
                if op.kind == "a":
                    pair_delta[(src, dst)] += 1
                else:
                    found = arcs_between(src, dst)
                    if found == 0:
                        raise DimacsError(op.line, f"no arc from {src} to {dst} to change")
                    if found > 1:
                        raise DimacsError(
                            op.line, f"{found} parallel arcs from {src} to {dst}: 'x' is ambiguous"
                        )
                    if low == 0 and cap == 0:
                        pair_delta[(src, dst)] -= 1

    def _apply_incremental(self, ops: list[_Op]) -> None:
        graph = self.graph
        assert graph is not None
        sink_set = False
        for op in ops:
            a = op.args
            if op.kind == "n":
                kind = a[2] if len(a) == 3 else NodeKind.OTHER
                graph.add_node(a[1], kind, node=a[0])
                sink_set |= kind == NodeKind.SINK
            elif op.kind == "r":
                graph.remove_node(a[0])
            elif op.kind == "e":
                graph.set_supply(a[0], a[1])
                sink_set |= graph.node_kind(a[0]) == NodeKind.SINK
            elif op.kind == "a":
                kind = a[5] if len(a) == 6 else 0
                graph.add_arc(a[0], a[1], lower=a[2], capacity=a[3], cost=a[4], kind=kind)
            else:
                (arc,) = graph.find_arcs(a[0], a[1])
                if a[2] == 0 and a[3] == 0:
                    graph.remove_arc(arc)
                else:
                    graph.change_arc(arc, lower=a[2], capacity=a[3], cost=a[4], kind=a[5])
        if not sink_set:
            balance_sink(graph)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _node_kind(line: int, value: int) -> int:
        if value not in NodeKind._value2member_map_:
            raise DimacsError(line, f"unknown node type {value} (expected 0-3)")
        return value

    @staticmethod
    def _supply(line: int, value: int) -> int:
        if abs(value) > MAX_CAPACITY:
            raise DimacsError(line, f"supply {value} exceeds the limit of {MAX_CAPACITY}")
        return value

    @staticmethod
    def _arc_kind(line: int, value: int) -> int:
        if not 0 <= value <= MAX_ARC_KIND:
            raise DimacsError(line, f"arc type {value} is not within 0..{MAX_ARC_KIND}")
        return value

    @staticmethod
    def _check_values(line: int, low: int, cap: int, cost: int) -> None:
        try:
            check_arc_values(low, cap, cost, "arc")
        except FlowGraphError as exc:
            raise DimacsError(line, str(exc)) from None


def balance_sink(graph: FlowGraph) -> bool:
    """Give the only node of type SINK the supply that balances the graph; False if none."""
    arrays = graph.arrays()
    sinks = np.flatnonzero(arrays.node_alive & (arrays.node_kind == NodeKind.SINK))
    if len(sinks) != 1:
        return False
    sink = int(sinks[0])
    others = graph.total_supply() - graph.supply(sink)
    graph.set_supply(sink, -others)
    return True


def decode_lines(stream: Iterable[bytes]) -> Iterator[str]:
    """The lines of a binary stream as text, for `DimacsReader`.

    DIMACS is ASCII; a line that is not UTF-8 (a binary file, a wrong encoding) raises
    `DimacsError` naming that line and column, which a text-mode file cannot do: it decodes
    ahead in blocks and reports no line at all.
    """
    for number, raw in enumerate(stream, start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a byte-order mark some editors write: not part of the first line
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            byte = raw[exc.start]
            raise DimacsError(
                number, f"not UTF-8 text (byte 0x{byte:02x} at column {exc.start + 1})"
            ) from None


def read_dimacs(stream: Iterable[str]) -> FlowGraph:
    """Read one whole problem (the first round of a stream)."""
    reader = DimacsReader(stream)
    for graph in reader.rounds():
        return graph
    raise DimacsError(1, "empty input: no 'p min' line")


def write_dimacs(graph: FlowGraph, out: TextIO) -> None:
    """Write the whole graph as a first round, ended by `c EOI` (as Firmament's exporter does).

    Every live node gets an `n` line; free ids below the largest one are simply not mentioned,
    and `DimacsReader` leaves unmentioned ids free, so ids survive a round trip.
    """
    a = graph.arrays()
    nodes = graph.node_ids()
    arcs = graph.arc_ids()
    out.write(f"p min {graph.node_id_bound - 1} {len(arcs)}\n")
    lines = [
        f"n {v} {s} {k}\n"
        for v, s, k in zip(
            nodes.tolist(), a.supply[nodes].tolist(), a.node_kind[nodes].tolist(), strict=True
        )
    ]
    out.writelines(lines)
    cols = zip(
        a.src[arcs].tolist(),
        a.dst[arcs].tolist(),
        a.low[arcs].tolist(),
        a.cap[arcs].tolist(),
        a.cost[arcs].tolist(),
        a.arc_kind[arcs].tolist(),
        strict=True,
    )
    out.writelines(f"a {s} {d} {lo} {c} {w} {t}\n" for s, d, lo, c, w, t in cols)
    out.write("c EOI\n")


def write_dimacs_changes(batch: ChangeBatch, out: TextIO, *, sink: int | None = None) -> None:
    """Write one incremental round, ended by `c EOI`.

    Supply changes of `sink` are left out: readers rebalance the sink (Firmament's convention).
    """
    for row in batch.rows.tolist():
        op = ChangeOp(row[COL_OP])
        ident = row[COL_ID]
        if op is ChangeOp.REMOVE_NODE:
            out.write(f"r {ident}\n")
        elif op is ChangeOp.ADD_NODE:
            out.write(f"n {ident} {row[NODE_SUPPLY]} {row[NODE_KIND]}\n")
        elif op is ChangeOp.SET_SUPPLY:
            if ident != sink:
                out.write(f"e {ident} {row[NODE_SUPPLY]}\n")
        elif op is ChangeOp.ADD_ARC:
            out.write(
                f"a {row[ARC_SRC]} {row[ARC_DST]} {row[ARC_LOW]} {row[ARC_CAP]} "
                f"{row[ARC_COST]} {row[ARC_KIND]}\n"
            )
        elif op is ChangeOp.REMOVE_ARC:
            out.write(
                f"x {row[ARC_SRC]} {row[ARC_DST]} 0 0 {row[ARC_COST]} {row[ARC_KIND]} "
                f"{row[ARC_OLD_COST]}\n"
            )
        elif row[ARC_LOW] == 0 and row[ARC_CAP] == 0:
            # Firmament reads `x ... 0 0` as a removal, so an arc that stays with no capacity
            # is removed and added again: readers keep it, and later rounds can change it.
            out.write(
                f"x {row[ARC_SRC]} {row[ARC_DST]} 0 0 {row[ARC_COST]} {row[ARC_KIND]} "
                f"{row[ARC_OLD_COST]}\n"
                f"a {row[ARC_SRC]} {row[ARC_DST]} 0 0 {row[ARC_COST]} {row[ARC_KIND]}\n"
            )
        else:
            out.write(
                f"x {row[ARC_SRC]} {row[ARC_DST]} {row[ARC_LOW]} {row[ARC_CAP]} {row[ARC_COST]} "
                f"{row[ARC_KIND]} {row[ARC_OLD_COST]}\n"
            )
    out.write("c EOI\n")


def write_flows(graph: FlowGraph, flow: np.ndarray, cost: int, out: TextIO) -> None:
    """Write a solution as DIMACS `s COST` and `f SRC DST FLOW` lines (positive flows only)."""
    a = graph.arrays()
    arcs = graph.arc_ids()
    arcs = arcs[flow[arcs] > 0]
    out.write(f"s {cost}\n")
    cols = zip(a.src[arcs].tolist(), a.dst[arcs].tolist(), flow[arcs].tolist(), strict=True)
    out.writelines(f"f {s} {d} {f}\n" for s, d, f in cols)
