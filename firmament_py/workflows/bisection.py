"""The k-balanced partitioning that PARTITION's first phase solves for k = 1..m (section V.C
of Giroire et al., INFOCOM'19), as the paper does it in practice: recursive minimum bisection
[27], each bisection by Kernighan and Lin's heuristic [29].

The paper's problem: a (k, nu)-balanced partition of a graph with vertex weights w (CPU times)
and edge weights (transfer times) is a cut into at most k parts each weighing at most
nu / k * w(V), with nu = 2 ("the k-balanced partitioning problem"); the best one has the least
cut weight. Recursive bisection cuts a set meant for k parts into two sets meant for ceil(k/2)
and floor(k/2) parts, each as close as it can to its share of the weight, minimising the cut.

What the paper leaves open, and what we chose:

* how close to its share a side must be at each level: within a factor f of it, where
  f ** levels = nu and levels = ceil(log2 k) is the depth of the recursion, so that a part at
  the bottom weighs at most nu / k * w(V), the paper's bound;
* a single task heavier than that allowance (the trace's durations are heavy-tailed): a side may
  always weigh as much as the heaviest task of the set, since no split can do better; a part
  holding such a task may then exceed the bound (`BalancedBisector.bound` is what a part may
  weigh);
* Kernighan-Lin balances cardinalities by swapping vertices in pairs, and its paper handles
  unequal parts with dummy vertices, which a swap trades for a real one: that is a single move.
  Both swaps and single moves are tried, and the weights decide balance: a move is taken only if
  both sides stay within their allowance (vertex weights respected, not vertex counts);
* the starting split, which Kernighan-Lin refines: two are refined, the tasks in topological
  order and in depth-first order of the undirected graph (which keeps neighbourhoods such as a
  map task and its reducer together), each cut at its share of the weight; the refined split of
  least cut wins (the minimum bisection), ties to the better balance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["NU", "BalancedBisector", "Bisection"]

NU = 2.0
"""The paper's balance: a part weighs at most NU / k of the whole ("When nu = 2, the problem is
just called the k-balanced partitioning problem")."""

_EPSILON = 1e-9
_SWAP_CANDIDATES = 8
"""Swaps are tried among the unlocked vertices of highest gain on each side (Kernighan and Lin
note that the best pair is found among the first few of each side sorted by gain)."""
_MAX_PASSES = 12
_PATIENCE = 20


@dataclass(frozen=True)
class Bisection:
    """Two sides of a set, the weight of the edges between them, and the sides' allowances."""

    a: frozenset[int]
    b: frozenset[int]
    cut: float
    cap_a: float
    cap_b: float


class BalancedBisector:
    """Recursive balanced bisection of a weighted graph, memoised on (set, split ratio, slack
    factor).

    `weights[v]` is vertex v's weight, `adjacency[v]` maps its neighbours to edge weights, and
    `order` lists the vertices in topological order (the first starting split)."""

    def __init__(
        self,
        weights: Sequence[float],
        adjacency: Sequence[dict[int, float]],
        order: Sequence[int],
        nu: float = NU,
    ) -> None:
        if nu < 1:
            raise ValueError(f"the balance nu must be at least 1, not {nu}")
        self.weights = list(weights)
        self.adjacency = adjacency
        self.position = {v: i for i, v in enumerate(order)}
        self.nu = nu
        self.memo: dict[tuple[frozenset[int], int, int, float], Bisection] = {}

    # ------------------------------------------------------------------ partitions

    def partition(self, tasks: frozenset[int], k: int) -> list[frozenset[int]]:
        """`tasks` cut into at most k parts by recursive bisection (empty parts dropped)."""
        if k < 1:
            raise ValueError(f"a partition needs k >= 1 parts, not {k}")
        levels = max(1, math.ceil(math.log2(k))) if k > 1 else 1
        factor = self.nu ** (1 / levels)
        return [part for part in self._parts(tasks, k, factor) if part]

    def bound(self, tasks: frozenset[int], k: int) -> float:
        """What a part of a k-partition of `tasks` may weigh: nu / k of the whole, or the
        heaviest task if that is more."""
        total = self.weight_of(tasks)
        return max(self.nu * total / k, max((self.weights[v] for v in tasks), default=0.0))

    def _parts(self, tasks: frozenset[int], k: int, factor: float) -> list[frozenset[int]]:
        if k <= 1 or len(tasks) <= 1:
            return [tasks]
        ka = (k + 1) // 2
        kb = k - ka
        split = self.bisect(tasks, ka, kb, factor)
        return self._parts(split.a, ka, factor) + self._parts(split.b, kb, factor)

    # ------------------------------------------------------------------ one bisection

    def weight_of(self, tasks: frozenset[int] | set[int]) -> float:
        return math.fsum(self.weights[v] for v in tasks)

    def cut(self, a: frozenset[int] | set[int], b: frozenset[int] | set[int]) -> float:
        """The total weight of the edges between `a` and `b`."""
        small, large = (a, b) if len(a) <= len(b) else (b, a)
        return math.fsum(w for u in small for v, w in self.adjacency[u].items() if v in large)

    def bisect(self, tasks: frozenset[int], ka: int, kb: int, factor: float) -> Bisection:
        """The least-cut split of `tasks` into a side for `ka` parts and one for `kb`, each
        within `factor` of its share of the weight (or as heavy as the heaviest task)."""
        g = math.gcd(ka, kb)
        key = (tasks, ka // g, kb // g, factor)
        if key in self.memo:
            return self.memo[key]
        total = self.weight_of(tasks)
        heaviest = max(self.weights[v] for v in tasks)
        share = ka / (ka + kb)
        cap_a = max(factor * share * total, heaviest)
        cap_b = max(factor * (1 - share) * total, heaviest)
        candidates = []
        for ordered in (self.topological_order(tasks), self.depth_first_order(tasks)):
            a = self.start(ordered, share * total, cap_a, cap_b, total)
            a = self.refine(tasks, a, cap_a, cap_b)
            b = tasks - a
            candidates.append(Bisection(frozenset(a), b, self.cut(a, b), cap_a, cap_b))

        def rank(split: Bisection) -> tuple[float, float, float]:
            overload = _overload(self.weight_of(split.a), self.weight_of(split.b), cap_a, cap_b)
            balance = abs(self.weight_of(split.a) - share * total)
            return (overload, round(split.cut, 9), balance)

        best = min(candidates, key=rank)
        self.memo[key] = best
        return best

    def topological_order(self, tasks: frozenset[int]) -> list[int]:
        return sorted(tasks, key=self.position.__getitem__)

    def depth_first_order(self, tasks: frozenset[int]) -> list[int]:
        """Tasks in depth-first order of the undirected graph (neighbours in topological
        order), so that a prefix holds whole neighbourhoods, such as a map task and its
        reducer."""
        order: list[int] = []
        seen: set[int] = set()
        for root in self.topological_order(tasks):
            if root in seen:
                continue
            stack = [root]
            while stack:
                u = stack.pop()
                if u in seen:
                    continue
                seen.add(u)
                order.append(u)
                neighbours = [v for v in self.adjacency[u] if v in tasks and v not in seen]
                stack.extend(sorted(neighbours, key=self.position.__getitem__, reverse=True))
        return order

    def start(
        self, ordered: list[int], target: float, cap_a: float, cap_b: float, total: float
    ) -> set[int]:
        """A prefix of `ordered` (non-empty, not everything) as side a: of the prefixes within
        both allowances, the one whose weight is nearest `target`; if none is, the least
        overloaded."""
        best_index, best_rank = 1, (math.inf, math.inf)
        running = 0.0
        for index, v in enumerate(ordered[:-1], start=1):
            running += self.weights[v]
            rank = (_overload(running, total - running, cap_a, cap_b), abs(running - target))
            if rank < best_rank:
                best_index, best_rank = index, rank
        return set(ordered[:best_index])

    def refine(self, tasks: frozenset[int], a: set[int], cap_a: float, cap_b: float) -> set[int]:
        """Kernighan-Lin passes from side `a` (the rest is side b): each pass moves, one step
        at a time, the unlocked vertex or pair of highest gain (cut weight saved) that keeps both
        sides within their allowance (no more overloaded than at the start), locks it, and at
        the end keeps the best prefix of its moves; passes repeat while they gain. A pass stops
        early after `_PATIENCE` moves without a new best (as Fiduccia-Mattheyses
        implementations do: the best prefix is almost always short)."""
        side = {v: v in a for v in tasks}  # True: side a
        weight_a = self.weight_of(a)
        total = self.weight_of(tasks)
        allowed = _overload(weight_a, total - weight_a, cap_a, cap_b) + _EPSILON
        gain_of = {
            v: self._external(v, side, tasks) - self._internal(v, side, tasks) for v in tasks
        }
        limits = (cap_a, cap_b, allowed, total)
        for _ in range(_MAX_PASSES):
            free = ({v for v in tasks if not side[v]}, {v for v in tasks if side[v]})
            moves: list[tuple[int, ...]] = []
            cumulative = best = 0.0
            best_length = 0
            while len(moves) - best_length < _PATIENCE:
                size_a = sum(side.values())
                move = self._best_move(free, gain_of, weight_a, size_a, limits)
                if move is None:
                    break
                vertices, gain = move
                for v in vertices:
                    weight_a += -self.weights[v] if side[v] else self.weights[v]
                    free[side[v]].discard(v)
                    self._flip(v, side, gain_of, tasks)
                moves.append(vertices)
                cumulative += gain
                if cumulative > best + _EPSILON:
                    best, best_length = cumulative, len(moves)
            for vertices in reversed(moves[best_length:]):
                for v in reversed(vertices):
                    weight_a += -self.weights[v] if side[v] else self.weights[v]
                    self._flip(v, side, gain_of, tasks)
            if best <= _EPSILON:
                break
        return {v for v in tasks if side[v]}

    def _external(self, v: int, side: dict[int, bool], tasks: frozenset[int]) -> float:
        return math.fsum(
            w for u, w in self.adjacency[v].items() if u in tasks and side[u] != side[v]
        )

    def _internal(self, v: int, side: dict[int, bool], tasks: frozenset[int]) -> float:
        return math.fsum(
            w for u, w in self.adjacency[v].items() if u in tasks and side[u] == side[v]
        )

    def _flip(
        self, v: int, side: dict[int, bool], gain_of: dict[int, float], tasks: frozenset[int]
    ) -> None:
        side[v] = not side[v]
        gain_of[v] = -gain_of[v]
        for u, w in self.adjacency[v].items():
            if u in tasks:
                gain_of[u] += -2 * w if side[u] == side[v] else 2 * w

    def _best_move(
        self,
        free: tuple[set[int], set[int]],
        gain_of: dict[int, float],
        weight_a: float,
        size_a: int,
        limits: tuple[float, float, float, float],
    ) -> tuple[tuple[int, ...], float] | None:
        """The unlocked single move or swap of highest gain that keeps the overload within the
        allowance and leaves both sides non-empty; ties to the lower vertex indices. `free` is
        (unlocked of side b, unlocked of side a); side a holds `size_a` tasks in all."""
        cap_a, cap_b, allowed, total = limits
        weights = self.weights
        free_a = sorted(free[1], key=lambda v: (-gain_of[v], v))
        free_b = sorted(free[0], key=lambda v: (-gain_of[v], v))
        size_b = len(gain_of) - size_a

        def fits(new_a: float) -> bool:
            return _overload(new_a, total - new_a, cap_a, cap_b) <= allowed

        best: tuple[tuple[int, ...], float] | None = None
        # Single moves: the first that fits, in order of gain, on each side.
        for ordered, sign, left in ((free_a, -1.0, size_a), (free_b, 1.0, size_b)):
            for v in ordered if left > 1 else ():
                if best is not None and gain_of[v] <= best[1] + _EPSILON:
                    break
                if fits(weight_a + sign * weights[v]):
                    best = ((v,), gain_of[v])
                    break
        # Swaps among the first few of each side (a swap gains at most the two gains).
        for x in free_a[:_SWAP_CANDIDATES]:
            for y in free_b[:_SWAP_CANDIDATES]:
                bound = gain_of[x] + gain_of[y]
                if best is not None and bound <= best[1] + _EPSILON:
                    break
                gain = bound - 2 * self.adjacency[x].get(y, 0.0)
                if (best is None or gain > best[1] + _EPSILON) and fits(
                    weight_a - weights[x] + weights[y]
                ):
                    best = ((x, y), gain)
        return best


def _overload(weight_a: float, weight_b: float, cap_a: float, cap_b: float) -> float:
    """How far the two sides weigh above their allowances, together."""
    return max(0.0, weight_a - cap_a) + max(0.0, weight_b - cap_b)
