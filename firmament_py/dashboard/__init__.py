"""The live dashboard (`serve --dashboard`, `simulate --dashboard`) and the simulator's static
`report.html`: a page that shows the cluster as a heat map, the queue, placement latency and
each round's phases as they happen.

`board.py` keeps what the page draws from facts a driver reports (no I/O); `daemon_feed.py`
and `sim_feed.py` are the two drivers' reporters (a follower of the daemon's change feed; the
simulator's observer); `page.py` draws a board's frame with Bokeh; `server.py` serves it live on
loopback; `__main__.py` is the process `serve --dashboard` starts beside the daemon. Only
`page.py` and `server.py` import Bokeh; the daemon imports only `address.py`.
"""
