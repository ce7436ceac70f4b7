"""firmament-py: a flow-based cluster scheduler with a typed policy SDK.

The package is organised in rooms with one concern each (see docs/ARCHITECTURE.md):
`flow` holds the flow network and its change log, `solvers` the min-cost flow algorithms.
"""

__version__ = "0.1.0"
