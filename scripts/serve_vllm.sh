#!/usr/bin/env bash
# Serve the paper-scale models with vLLM's OpenAI-compatible server (the gpu extra: pip install -e '.[gpu]', on a GPU node).
# The run config then names them as `backend: openai, source: server` models (config/paper.yaml has
# qwen3-32b-vllm at http://localhost:8000/v1); every request carries the key from $VLLM_API_KEY.
#
#   scripts/serve_vllm.sh policy [results/paper]   # Qwen3-32B + the trained policy adapters, port 8000
#   scripts/serve_vllm.sh rm     [results/paper]   # Qwen3-32B + the three reward-model adapters, port 8001
#
# With --enable-lora one server answers for the base weights (model "Qwen/Qwen3-32B") and for each
# adapter under its own name (model "echo", "scalar", "rm-empathy", ...), so the sandbox can compare
# the base with the RL variants on the same bf16 weights. Sizes: 64 GB of bf16 weights, so tensor
# parallelism over 2 x 80 GB GPUs leaves room for the KV cache of 30 lock-step dialogues.
set -euo pipefail
what=${1:?usage: serve_vllm.sh policy|rm [run_dir]}
run=${2:-results/paper}
: "${VLLM_API_KEY:?set VLLM_API_KEY (any string; clients send the same one)}"
common=(--dtype bfloat16 --tensor-parallel-size "${TP:-2}" --max-model-len "${MAX_LEN:-32768}"
        --api-key "$VLLM_API_KEY" --enable-lora --max-lora-rank "${MAX_LORA_RANK:-64}"
        --generation-config vllm    # sampling from each request (EMPA Table 7: 0.7 / 0.8), not the model's file
        --enable-prefix-caching)    # a dialogue's next prompt extends its last one: only the new turn is prefilled

case "$what" in
  policy)
    exec vllm serve Qwen/Qwen3-32B --port 8000 "${common[@]}" \
      --lora-modules "echo=$run/policy/echo/adapter" "scalar=$run/policy/scalar/adapter" ;;
  rm)
    exec vllm serve Qwen/Qwen3-32B --port 8001 "${common[@]}" \
      --lora-modules "rm-empathy=$run/rm/empathy/adapter" "rm-humanlike=$run/rm/humanlike/adapter" \
                     "rm-scalar=$run/rm/scalar/adapter" ;;
  *) echo "unknown target $what (policy | rm)" >&2; exit 2 ;;
esac
