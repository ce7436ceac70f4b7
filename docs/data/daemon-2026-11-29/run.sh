#!/bin/bash
# Before/after of the daemon benches, alternated: old = fcc16c8 (before issue 35's daemon work),
# dicts = f7ddb5d (feed of dicts), frames = 1486388 (feed of frames).
cd /tmp/cmp
PY=/work/i32/.venv/bin/python
BENCH=/work/runs3/bench
for tree in /work/runs /work/runs3; do
  PYTHONPATH=$tree $PY -c "from firmament_py.solvers.warmup import warm_up; warm_up('cost-scaling', {})" >> warm.out 2>&1
done
for v in old:/work/runs frames:/work/runs3 dicts:/work/runs2 old:/work/runs frames:/work/runs3; do
  name=${v%%:*}; tree=${v#*:}
  echo "$(date +%T) ingest $name" >> log
  PYTHONPATH=$tree $PY $BENCH/daemon_ingest.py --batch 20 --rate 20000 --window 4 --seconds 15 --repeats 2 >> ingest-$name.out 2>&1
done
for v in old:/work/runs frames:/work/runs3; do
  name=${v%%:*}; tree=${v#*:}
  echo "$(date +%T) recovery $name" >> log
  PYTHONPATH=$tree $PY $BENCH/daemon_recovery.py --repeats 3 >> recovery-$name.out 2>&1
done
echo "$(date +%T) done" >> log
