"""Firmament's evaluation as experiments: the shape of Figures 7, 8 and 16, 9, 12a, 14 and 18 of the
OSDI '16 paper (https://www.usenix.org/conference/osdi16/technical-sessions/presentation/gog),
rerun on this port, one module per figure. The framework (scales, measurements, claims, what a
run writes) is `firmament_py.sim.experiment`; the series the figures share (algorithm names, the
solvers behind them, labels, colours) are `series`; the registry is
`firmament_py.sim.experiments`.
"""

from firmament_py.sim.figures.fig7 import FIG7, Fig7Params
from firmament_py.sim.figures.fig8_16 import FIG8_16, Fig816Params
from firmament_py.sim.figures.fig9 import FIG9, Fig9Params
from firmament_py.sim.figures.fig12a import FIG12A, Fig12Params
from firmament_py.sim.figures.fig14 import FIG14, Fig14Params
from firmament_py.sim.figures.fig18 import FIG18, Fig18Params

__all__ = [
    "FIG7",
    "FIG8_16",
    "FIG9",
    "FIG12A",
    "FIG14",
    "FIG18",
    "Fig7Params",
    "Fig9Params",
    "Fig12Params",
    "Fig14Params",
    "Fig18Params",
    "Fig816Params",
]
