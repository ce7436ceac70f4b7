#!/bin/bash
# Issue 35 remaining targets, alone on the VM: old = /work/runs1 (95bbbc6), new = /work/runs2 (9d76769), worktrees of the repository.
cd /tmp/b35
PY=/work/i32/.venv/bin/python
for tree in /work/runs1 /work/runs2; do
  PYTHONPATH=$tree $PY -c "from firmament_py.solvers.warmup import warm_up; warm_up('cost-scaling', {})" >> warm.out 2>&1
done
for v in old:/work/runs1 new:/work/runs2 old:/work/runs1 new:/work/runs2; do
  name=${v%%:*}; tree=${v#*:}
  echo "$(date +%T) recovery $name" >> log
  PYTHONPATH=$tree $PY $tree/bench/daemon_recovery.py --repeats 3 >> recovery-$name.out 2>&1
done
for args in "--clients 1 --live 4000 --batch 100" "--clients 2 --live 2000 --batch 50" "--clients 8 --batch 20"; do
  tag=$(echo $args | tr -d ' -')
  echo "$(date +%T) ingest $tag" >> log
  PYTHONPATH=/work/runs2 $PY /work/runs2/bench/daemon_ingest.py $args --rate 20000 --window 4 --seconds 15 --repeats 3 >> ingest-$tag.out 2>&1
done
echo "$(date +%T) done" >> log
