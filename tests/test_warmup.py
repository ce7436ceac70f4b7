"""`solvers.warmup`: a warmed-up solver has every kernel of a round loaded before the round.

Each check runs in a fresh interpreter: in this one, earlier tests have loaded the kernels.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from firmament_py.solvers.warmup import warm_up

# A fresh interpreter: optionally warm up, then report which kernels numba has loaded.
_PROBE = """
import json, sys
from firmament_py.flow import batch_rules, graph, placement
from firmament_py.solvers import cost_scaling, kernels, network, relaxation
from firmament_py.solvers.warmup import warm_up
algorithm, options, warm = json.loads(sys.argv[1])
if warm:
    warm_up(algorithm, options)
names = {
    "relaxation": [
        (relaxation, "_relax"),
        (relaxation, "_route_balanced"),
        (relaxation, "_price_by_distance_to_deficit"),
        (relaxation, "_price_by_distance_from_surplus"),
        (kernels, "seed_fresh_prices"),
        (network, "load_flows"),
    ],
    "cost-scaling": [
        (cost_scaling, "_refine"),
        (kernels, "price_refine"),
        (cost_scaling, "_rounded_violations"),
        (kernels, "price_refine_from"),
        (network, "load_flows"),  # a race worker's sync
        (cost_scaling, "_lift_prices"),  # and its solve from the adopted answer
    ],
    # The caller's side of a race: the graph's snapshot, the batch checks it makes itself.
    "race": [
        (graph, "_fill_snapshot_rows"),
        (batch_rules, "_replay"),
        (batch_rules, "_first_bad_value_row"),
    ],
}[algorithm]
names += [(placement, "_check_flow"), (placement, "_follow_units")]  # every round reads placements
loaded = {name: bool(getattr(module, name).signatures) for module, name in names}
if algorithm != "race":  # a network is built from a graph's arrays, or from a snapshot's rows
    loaded["_build_network"] = len(network._build_network.signatures) == 2
print(json.dumps(loaded))
"""


def _loaded(algorithm: str, options: dict[str, object], warm: bool) -> dict[str, bool]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps([algorithm, options, warm])],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, bool] = json.loads(out.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize(
    ("algorithm", "options"),
    [("relaxation", {"incremental": True}), ("cost-scaling", {}), ("race", {})],
)
def test_warm_up_loads_every_kernel_of_a_round(algorithm: str, options: dict[str, object]) -> None:
    assert not any(_loaded(algorithm, options, warm=False).values())  # the probe can tell
    assert all(_loaded(algorithm, options, warm=True).values())


@pytest.mark.parametrize("algorithm", ["race", "ssp", "relax"])
def test_warm_up_accepts_every_solver_name(algorithm: str) -> None:
    warm_up(algorithm)  # aliases are known


def test_warm_up_refuses_unknown_solvers_and_options() -> None:
    with pytest.raises(ValueError, match="unknown solver"):
        warm_up("simplex")
    with pytest.raises(ValueError, match="bad options"):
        warm_up("relaxation", {"tree_limt": 5})


# A fresh interpreter runs a short simulation and reports whether the solver's kernels were
# loaded when the scheduler was built, that is before the first round.
_SIMULATION_PROBE = """
import json
from firmament_py.sim import runner
from firmament_py.solvers import cost_scaling, kernels
seen = {}
class Probe(runner.Scheduler):
    def __init__(self, *args, **kwargs):
        seen["loaded"] = bool(cost_scaling._refine.signatures and kernels.price_refine.signatures)
        super().__init__(*args, **kwargs)
runner.Scheduler = Probe
runner.run_job(runner.SimulationJob(synthetic="small", duration_s=5, accounting="none"))
print(json.dumps(seen))
"""


def test_a_simulation_warms_its_solver_up_before_the_first_round() -> None:
    # Without it the first rounds' algorithm runtimes include numba loading the kernels, and the
    # summary's p99 and max report that instead of the algorithm.
    out = subprocess.run(
        [sys.executable, "-c", _SIMULATION_PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == {"loaded": True}


def test_a_simulation_with_a_race_waits_for_its_workers_before_the_first_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A race's workers warm up in their own processes; without the wait, the first round's
    # algorithm runtime would be their warm-up (about a second).
    from firmament_py.sim import runner
    from firmament_py.solvers import RacingSolver

    calls: list[str] = []
    wait_ready, solve = RacingSolver.wait_ready, RacingSolver.solve

    def recorded_wait(self: RacingSolver, timeout: float | None = None) -> bool:
        calls.append("wait_ready")
        return wait_ready(self, timeout)

    def recorded_solve(self: RacingSolver) -> object:
        calls.append("solve")
        return solve(self)

    monkeypatch.setattr(RacingSolver, "wait_ready", recorded_wait)
    monkeypatch.setattr(RacingSolver, "solve", recorded_solve)
    job = runner.SimulationJob(synthetic="small", duration_s=5, accounting="none", solver="race")
    runner.run_job(job)
    assert calls[:2] == ["wait_ready", "solve"]
