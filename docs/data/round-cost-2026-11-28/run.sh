#!/bin/bash
# Final: old (cf1d901) and new (issue-32 head) alternated, the same (new) bench script.
. ./.venv/bin/activate
B=./bench/round_cost.py
cd /tmp
run() {
  local label=$1; shift
  if [[ $label == old-* ]]; then export PYTHONPATH=/tmp/head:/tmp/headpath; else unset PYTHONPATH; fi
  python $B "$@" > OUT/$label.txt 2>&1
}
for policy in quincy load-spreading; do
  run new-$policy-12500 --policy $policy --ortools --runs 5
  run old-$policy-12500 --policy $policy --ortools --runs 3
  run new-$policy-1250 --policy $policy --machines 1250 --tasks 13500 --ortools
  run old-$policy-1250 --policy $policy --machines 1250 --tasks 13500 --ortools
done
for policy in quincy load-spreading; do
  for scenario in join leave labels; do
    run new-$policy-12500-$scenario --policy $policy --scenario $scenario
  done
  run new-$policy-12500-race --policy $policy --solver race
done
unset PYTHONPATH
for acc in round algorithm; do
  /usr/bin/time -v firmament-py simulate --synthetic google --policy quincy --duration 600 \
    --accounting $acc --no-plots --out OUT/sim-quincy-$acc > OUT/sim-quincy-$acc.txt 2>&1
done
/usr/bin/time -v firmament-py simulate --synthetic google --policy load-spreading --duration 600 \
  --accounting round --no-plots --out OUT/sim-ls-round > OUT/sim-ls-round.txt 2>&1
echo done > OUT/done
