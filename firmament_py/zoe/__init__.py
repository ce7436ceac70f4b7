"""Zoe's flexible scheduling of analytic applications (Pace et al., "Flexible Scheduling of
Distributed Analytic Applications", https://arxiv.org/abs/1611.09528).

Applications made of core components (all needed to make progress) and elastic ones (that only
speed them up) are admitted and granted resources by the flexible scheduler (Algorithms 1 and
2), ordered by pluggable sorting policies, compared with rigid and malleable baselines in a
discrete-event simulator, and placed on machines through the flow scheduler. The rooms:

    capacity     cpu and ram amounts, the cluster's machines
    application  applications and components, the service model, descriptions and bad input
    hookspecs    the sorting policies' pluggy hooks;  sorting  FIFO, SJF x3, SRPT, HRRN
    scheduler    the lines and grants every scheduler shares, refusal at submission
    flexible     Algorithms 1 and 2;  baselines  rigid and malleable
    simulator    the discrete-event simulator and its metrics
    workload     applications sampled from the paper's distributions
    placement    carrying assignments out through `firmament_py.scheduler.Scheduler`
    experiment   `zoe-turnaround`, `zoe-preemption` (and `-paper`);  cli  the `zoe` command group

`docs/zoe.md` describes the design and the measurements.
"""
