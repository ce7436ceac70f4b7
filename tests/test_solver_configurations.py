"""The paper's solver configurations by name, beside this project's: `relaxation-pure` (RELAX-IV
with no tree handed to blocking-flow sweeps) and `firmament-race` (relaxation from scratch
against incremental cost scaling, both every round, as Firmament's section 6.1 races them)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from firmament_py.cli import main
from firmament_py.flow.graphgen import ClusterGraph, ClusterSpec
from firmament_py.solvers import SuccessiveShortestPathSolver, make_solver
from firmament_py.solvers.racing import RacingSolver
from firmament_py.solvers.registry import solver_names
from firmament_py.solvers.relaxation import RelaxationSolver
from firmament_py.solvers.warmup import warm_up


def test_the_configurations_are_named_solvers() -> None:
    assert {"relaxation-pure", "firmament-race"} <= set(solver_names())
    pure = make_solver("relaxation-pure")
    assert isinstance(pure, RelaxationSolver) and pure.tree_limit == 0
    assert not pure.incremental
    race = make_solver("firmament-race")
    try:
        assert isinstance(race, RacingSolver)
        assert race.algorithms == ("relaxation", "cost-scaling")
        assert race.hedge is None  # both contenders start every round
        assert race._options["relaxation"] == {"incremental": False}
    finally:
        race.close()


def test_firmament_race_answers_every_round_optimally() -> None:
    cluster = ClusterGraph(
        ClusterSpec(
            machines=30,
            slots_per_machine=4,
            machines_per_rack=10,
            running=0.5,
            waiting=40,
            shape="quincy",
            seed=3,
        )
    )
    warm_up("firmament-race")
    race = make_solver("firmament-race")
    try:
        for _ in range(4):
            expected = SuccessiveShortestPathSolver().solve_graph(cluster.graph.copy()).cost
            result = race.solve_graph(cluster.graph)
            assert result.cost == expected
            cluster.observe(result.flow)
            cluster.next_round(churn=0.1)
    finally:
        race.close()


def test_simulate_runs_the_paper_configurations(tmp_path: Path) -> None:
    for solver in ("relaxation-pure", "firmament-race"):
        result = CliRunner().invoke(
            main,
            [
                *("simulate", "--synthetic", "small", "--duration", "20", "--solver", solver),
                *("--accounting", "none", "--no-plots", "-q", "--out", f"{tmp_path}/{solver}"),
            ],
        )
        assert result.exit_code == 0, (solver, result.output)
