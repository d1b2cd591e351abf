#!/usr/bin/env bash
# The real two-version check (issue 26): record models under torch 2.13.0 (.venv) and compare them
# under torch 2.14.1 (a second venv, the CUDA build that runs on the CPU, ~5.5 GB). Not part of make test.
#   make envs-compare                      # the default models below
#   benchmarks/envs_compare.sh MODEL.py ...
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OTHER="${ENVS_OTHER_VENV:-$ROOT/.venv-torch-2.14.1}"
OUT="${ENVS_OUT:-$ROOT/out/envs-compare}"
if [ ! -x "$OTHER/bin/python" ]; then
  python3 -m venv "$OTHER" && "$OTHER/bin/pip" install -q torch==2.14.1 networkx click tqdm || exit 2
fi
[ $# -gt 0 ] || set -- repro_cases/clean_bf16.py repro_cases/closer_to_fp64_backward_hinge.py \
                       repro_cases/layernorm_saved_stats.py repro_cases/mish_log1p_bug.py
mkdir -p "$OUT"
printf '%-32s %-7s %-8s %-9s %s\n' model record compare seconds "first change"
for model in "$@"; do
  name=$(basename "$model" .py)
  rm -rf "$OUT/A_$name" "$OUT/B_$name"
  start=$(date +%s)
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) "$ROOT/.venv/bin/python" -m bisect_engine.cli record "$ROOT/$model" \
      --out "$OUT/A_$name" > "$OUT/record_$name.log" 2>&1
  recorded=$?
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) PYTHONPATH="$ROOT" "$OTHER/bin/python" -m bisect_engine.cli compare \
      "$OUT/A_$name" --out "$OUT/B_$name" > "$OUT/compare_$name.log" 2>&1
  compared=$?
  first=$(grep -m1 '^first change' "$OUT/compare_$name.log" || echo "-")
  printf '%-32s %-7s %-8s %-9s %s\n' "$name" "$recorded" "$compared" "$(( $(date +%s) - start ))" "$first"
done
