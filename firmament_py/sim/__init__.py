"""The trace-driven simulator: workloads (Google trace replay, synthetic), a discrete-event
core, and the metrics and plots of a run."""
