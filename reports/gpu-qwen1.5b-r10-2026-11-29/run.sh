#!/bin/bash
# Session 22, second device run (issue 32): the frozen Qwen 1.5B reader, its criterion head
# with the tags calibrated out of fold, held out, and the probes with the head.
set -u
R=/tmp/r11; O=$R/out; mkdir -p $O $R/logs $R/g
cd $R/tree
export PYTHONPATH=$R/tree:$R/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled \
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
stamp() { echo "$(date +%T) $*" >> $R/logs/events; }
stamp start
Q=qwen2.5-coder-1.5b-instruct
python3 -c "from argen.models import resolve_model; print(resolve_model('$Q'))" > $R/logs/resolve.log 2>&1 || { stamp resolve-failed; exit 1; }
stamp resolved
HELD="--held-out-origin policy:qwen1.5b-r4-careful --held-out-origin policy:qwen1.5b-careful-prefect --held-out-origin policy:qwen1.5b-r6 --held-out-origin policy:qwen1.5b-r7 --held-out-origin policy:qwen1.5b-r8"
python3 -m argen.training.grader --backbone $Q --out $R/g/frozen > $R/logs/frozen.log 2>&1; stamp "frozen reader rc=$?"
python3 -m argen.training.criteria --grader $R/g/frozen $HELD > $R/logs/frozen-crit.log 2>&1; stamp "frozen criteria rc=$?"
cp $R/g/frozen/reader.json $O/frozen.json; cp $R/g/frozen/README.md $O/frozen-card.md
python3 -m argen.judging.probes --grader $R/g/frozen > $R/logs/frozen-probes.log 2>&1; stamp "frozen probes rc=$?"
cp $R/logs/*-probes.log $O/
stamp all-done
