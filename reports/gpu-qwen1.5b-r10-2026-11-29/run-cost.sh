#!/bin/bash
# Session 22 device run (issue 32): the reward's cost with the rubric read in one pass against
# two (Qwen 1.5B, a random Qwen 0.5B shape, MiniLM), then the frozen Qwen 1.5B reader, its
# criterion head on the new layout with calibrated tags, held out, and the probes with and
# without the head. Runs from its own copy of the checkout (/tmp/r10/tree).
set -u
R=/tmp/r10; O=$R/out; mkdir -p $O $R/logs $R/g
cd $R/tree
export PYTHONPATH=$R/tree:$R/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled \
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
stamp() { echo "$(date +%T) $*" >> $R/logs/events; }
stamp start
Q=qwen2.5-coder-1.5b-instruct
python3 -c "from argen.models import resolve_model; print(resolve_model('$Q'))" > $R/logs/resolve.log 2>&1 || { stamp resolve-failed; exit 1; }
stamp resolved
python3 - > $R/logs/shape.log 2>&1 <<'PY'
import json, shutil
from pathlib import Path
import torch
from transformers import AutoConfig, AutoModelForCausalLM
from argen.models import resolve_model
src = Path(resolve_model("qwen2.5-coder-1.5b-instruct"))
out = Path("/tmp/r10/qwen05"); out.mkdir(parents=True, exist_ok=True)
config = AutoConfig.for_model(**json.loads(Path(".devcarry/r10/qwen2.5-0.5b-instruct.json").read_text()))
model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
model.save_pretrained(out)
for f in src.iterdir():
    if "token" in f.name or f.name in ("vocab.json", "merges.txt"):
        shutil.copy(f, out / f.name)
print(sorted(p.name for p in out.iterdir()))
PY
stamp "shape rc=$?"
python3 -m benchmarks.reward_cost --fresh $Q --fresh /tmp/r10/qwen05 --fresh all-MiniLM-L6-v2 > $O/cost.jsonl 2> $R/logs/cost.log; stamp "cost rc=$?"
HELD="--held-out-origin policy:qwen1.5b-r4-careful --held-out-origin policy:qwen1.5b-careful-prefect --held-out-origin policy:qwen1.5b-r6 --held-out-origin policy:qwen1.5b-r7 --held-out-origin policy:qwen1.5b-r8"
python3 -m argen.training.grader --backbone $Q --out $R/g/frozen > $R/logs/frozen.log 2>&1; stamp "frozen reader rc=$?"
cp -r $R/g/frozen $R/g/heads
( python3 -m argen.judging.probes --grader $R/g/heads > $R/logs/heads-probes.log 2>&1; stamp "heads probes rc=$?" ) &
python3 -m argen.training.criteria --grader $R/g/frozen $HELD > $R/logs/frozen-crit.log 2>&1; stamp "frozen criteria rc=$?"
cp $R/g/frozen/reader.json $O/frozen.json
python3 -m argen.judging.probes --grader $R/g/frozen > $R/logs/frozen-probes.log 2>&1; stamp "frozen probes rc=$?"
wait
cp $R/logs/*-probes.log $O/
python3 -m benchmarks.reward_cost $R/g/frozen > $O/cost-trained.jsonl 2> $R/logs/cost-trained.log; stamp "cost trained rc=$?"
stamp all-done
