"""NoMora: latency-driven, application-performance-aware scheduling (Popescu and Moore; the
tech report, https://arxiv.org/abs/1903.07114, and the article "Network Latency and Application
Performance Aware Cluster Scheduling in Data Centers", IEEE Network 36).

* `latency`: latency sources (topology defaults, a replayed trace, live samples) and traces;
* `performance`: the application performance functions (the paper's four fitted ones and users'
  own), their 10 µs lookup tables, the cost NoMora derives from a performance, function files;
* `fitting`: fitting the two-piece model (threshold, then a cubic) to measurements with scipy;
* `simulation`: the paper's simulation setup (section 6) on this port's simulator;
* `experiment`: the `nomora-*` experiments;
* `cli`: the `nomora` command group (`fit`, `functions`, `trace`).

* `policy`: the policy (`nomora` and `nomora-preemption` by name), written only against the SDK
  and the modules above.

Drivers find the latency sources as `firmament_plugins.latency` too (plugins/latency.py).
"""
