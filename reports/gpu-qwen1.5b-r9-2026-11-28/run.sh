#!/bin/bash
# Session 21 device run (issue 32): criterion heads over the Qwen 1.5B readers (frozen and
# tuned), measured held out (all items, and the careful line's answers), probed, and the
# reward's cost per step. Runs from its own copy of the checkout (/tmp/r9/tree).
set -u
R=/tmp/r9; O=$R/out; mkdir -p $O $R/logs
cd $R/tree
export PYTHONPATH=$R/tree:$R/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled \
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
stamp() { echo "$(date +%T) $*" >> $R/logs/events; }
stamp start
python3 -c "from argen.models import resolve_model; print(resolve_model('qwen2.5-coder-1.5b-instruct'))" > $R/logs/resolve.log 2>&1 || { stamp resolve-failed; exit 1; }
stamp resolved
Q=qwen2.5-coder-1.5b-instruct
HELD="--held-out-origin policy:qwen1.5b-r4-careful --held-out-origin policy:qwen1.5b-careful-prefect --held-out-origin policy:qwen1.5b-r6 --held-out-origin policy:qwen1.5b-r7 --held-out-origin policy:qwen1.5b-r8"
probe() {  # NAME: the probe suite with the grader, and its record
  cp $R/g/$1/reader.json $O/$1.json
  python3 -m argen.judging.probes --grader $R/g/$1 > $R/logs/$1-probes.log 2>&1; stamp "$1 probes rc=$?"
  cp $R/logs/$1-probes.log $O/
}
( python3 -m argen.training.criteria --backbone $Q --grader $R/g/joint --epochs 2 $HELD > $R/logs/joint.log 2>&1
  stamp "joint rc=$?"; probe joint ) &
sleep 20
( python3 -m argen.training.grader --backbone $Q --out $R/g/frozen > $R/logs/frozen.log 2>&1; stamp "frozen reader rc=$?"
  python3 -m argen.training.criteria --grader $R/g/frozen $HELD > $R/logs/frozen-crit.log 2>&1; stamp "frozen criteria rc=$?"
  probe frozen ) &
wait
python3 -m benchmarks.reward_cost $R/g/frozen $R/g/joint > $O/cost.jsonl 2> $R/logs/cost.log; stamp "cost rc=$?"
stamp all-done
