"""The trivial policy: Firmament's TrivialCostModel, a baseline that places any task anywhere.

Source: `src/scheduling/flow/trivial_cost_model.cc` in camsas/firmament, the cost model
Firmament keeps for testing. Every task has an arc to the cluster aggregator (cost 2), which has
an arc to every machine (cost 0, capacity the machine's free slots); leaving a task waiting costs
5, a constant. Any free slot therefore beats waiting (2 < 5), every placement costs the same, and
which task gets a slot when slots are short, or which machine a task lands on, is whatever the
solver finds first. Everything else costs 0.

The SDK's defaults already are this model apart from the waiting cost (they charge 1,000,000
plus one per second waited, so that the oldest tasks go first), so this policy only sets that.
Tasks with label selectors go through the defaults' selector classes, which reach only matching
machines. Firmament's model also adds one preference arc per task to a randomly picked machine
(`--num_pref_arcs_task_to_res`); it is left out, since it makes the baseline random.
"""

from __future__ import annotations

from firmament_py.sdk import ArcDescriptor, TimedArcs, hookimpl

TRIVIAL_UNSCHEDULED_COST = 5
"""Firmament's TaskToUnscheduledAggCost: above the aggregator's 2, so free slots are taken."""


class TrivialPolicy:
    """Place tasks in any free slot; waiting costs a constant 5 (see the module docstring)."""

    @hookimpl
    def task_to_unscheduled_batch(self) -> TimedArcs:
        return TimedArcs(TRIVIAL_UNSCHEDULED_COST)  # per_second 0: it does not grow

    @hookimpl
    def task_to_unscheduled(self) -> ArcDescriptor:
        return ArcDescriptor(TRIVIAL_UNSCHEDULED_COST)
