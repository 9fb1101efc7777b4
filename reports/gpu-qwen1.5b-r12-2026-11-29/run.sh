#!/bin/bash
# Session 23 device run (issue 32): the frozen Qwen 1.5B reader and the tuned one, each with a
# criterion head retrained on the new harm criteria, held out, and the probes.
set -u
R=/tmp/r12; O=$R/out; mkdir -p $O $R/logs $R/g
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
cp $R/logs/*-probes.log $R/logs/*-crit.log $O/
python3 -m argen.training.grader --backbone $Q --finetune --epochs 3 --out $R/g/tuned > $R/logs/tuned.log 2>&1; stamp "tuned reader rc=$?"
python3 -m argen.training.criteria --grader $R/g/tuned $HELD > $R/logs/tuned-crit.log 2>&1; stamp "tuned criteria rc=$?"
cp $R/g/tuned/reader.json $O/tuned.json; cp $R/g/tuned/README.md $O/tuned-card.md
python3 -m argen.judging.probes --grader $R/g/tuned > $R/logs/tuned-probes.log 2>&1; stamp "tuned probes rc=$?"
cp $R/logs/*-probes.log $R/logs/*-crit.log $O/
stamp all-done
