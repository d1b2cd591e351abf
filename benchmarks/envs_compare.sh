#!/usr/bin/env bash
# The real two-version check (issue 26): record models under torch 2.13.0 (environment A) and compare
# them under torch 2.14.1 (environment B: the CUDA build, which runs on the CPU, ~5.5 GB). Not part of make test.
#   make envs-compare                          # the default models below
#   benchmarks/envs_compare.sh MODEL.py ...
# Environment:
#   ENVS_PYTHON_A     A's interpreter (default: .venv/bin/python here, else the main checkout's .venv of a git worktree)
#   ENVS_OTHER_VENV   B's venv (default: .venv-torch-2.14.1 here; created on first use with pip install
#                     torch==2.14.1 plus what the models import; an existing one is used as it is)
#   ENVS_OTHER_PATH   extra PYTHONPATH entries for B only (e.g. a folder of links to transformers)
#   ENVS_OUT          where bundles, comparisons and logs go (default: out/envs-compare)
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MAIN="$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null | sed 's#/.git$##')"
A_PY="${ENVS_PYTHON_A:-$ROOT/.venv/bin/python}"
[ -x "$A_PY" ] || A_PY="$MAIN/.venv/bin/python"
OTHER="${ENVS_OTHER_VENV:-$ROOT/.venv-torch-2.14.1}"
OUT="${ENVS_OUT:-$ROOT/out/envs-compare}"
[ -x "$A_PY" ] || { echo "envs-compare: no interpreter for A (make venv, or set ENVS_PYTHON_A)" >&2; exit 2; }
if [ ! -x "$OTHER/bin/python" ]; then
  echo "envs-compare: creating $OTHER (torch 2.14.1, ~5.5 GB)" >&2
  python3 -m venv "$OTHER" && "$OTHER/bin/pip" install -q torch==2.14.1 networkx click tqdm numpy transformers \
    || { echo "envs-compare: could not create $OTHER (set ENVS_OTHER_VENV to an existing one)" >&2; exit 2; }
fi
B_PATH="$ROOT${ENVS_OTHER_PATH:+:$ENVS_OTHER_PATH}"
versions="$(cd / && "$A_PY" -c 'import torch; print(torch.__version__)') -> $(cd / && PYTHONPATH="$B_PATH" "$OTHER/bin/python" -c 'import torch; print(torch.__version__)')" \
  || { echo "envs-compare: torch does not import in one of the environments" >&2; exit 2; }
[ $# -gt 0 ] || set -- repro_cases/clean_bf16.py repro_cases/closer_to_fp64_backward_hinge.py \
                       repro_cases/models/hf_bert_eval.py repro_cases/models/hf_gpt2_eval.py \
                       repro_cases/models/hf_llama_eval.py repro_cases/models/hf_t5_eval.py \
                       repro_cases/models/resnet_eval.py repro_cases/models/vit_eval.py repro_cases/models/convnext_eval.py
mkdir -p "$OUT"
echo "torch $versions; bundles, comparisons and logs in $OUT"
printf 'model\trecord\tcompare\tseconds\tgraphs aligned\teager changed\tcompiled changed\tfirst change\tvs fp64\tvs eager\n'
for model in "$@"; do
  name=$(basename "$model" .py)
  path="$(cd "$(dirname "$model")" && pwd)/$(basename "$model")"
  rm -rf "$OUT/A_$name" "$OUT/B_$name"
  start=$(date +%s)
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) PYTHONPATH="$ROOT" "$A_PY" -m bisect_engine.cli record "$path" \
      --out "$OUT/A_$name" > "$OUT/record_$name.log" 2>&1
  recorded=$?
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) PYTHONPATH="$B_PATH" "$OTHER/bin/python" -m bisect_engine.cli compare \
      "$OUT/A_$name" --out "$OUT/B_$name" > "$OUT/compare_$name.log" 2>&1
  compared=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$recorded" "$compared" "$(( $(date +%s) - start ))" \
      "$("$A_PY" "$ROOT/benchmarks/envs_row.py" "$OUT/B_$name/comparison.json")"
done
