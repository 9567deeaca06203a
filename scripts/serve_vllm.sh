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

case "$what" in
  policy) port=8000; adapters=("echo=$run/policy/echo/adapter" "scalar=$run/policy/scalar/adapter") ;;
  rm)     port=8001; adapters=("rm-empathy=$run/rm/empathy/adapter" "rm-humanlike=$run/rm/humanlike/adapter"
                               "rm-scalar=$run/rm/scalar/adapter") ;;
  *) echo "unknown target $what (policy | rm)" >&2; exit 2 ;;
esac

# LoRA slots: vLLM's --max-loras (default 1) is how many adapters one batch may mix; with fewer slots than
# adapters, requests for the others wait, and the sandbox's lock-step dialogues of echo and scalar serialise.
max_loras=${MAX_LORAS:-${#adapters[@]}}
# LoRA rank: the largest r of the served adapters (adapter_config.json; the run config's policy.lora.r and
# reward_models.lora.r), rounded up to a rank vLLM accepts; 64 (paper.yaml's reward_models.lora.r) where none
# is readable yet. MAX_LORA_RANK overrides it.
rank=0
for module in "${adapters[@]}"; do
  cfg="${module#*=}/adapter_config.json"
  r=$( [[ -f "$cfg" ]] && grep -o '"r": *[0-9]*' "$cfg" | grep -o '[0-9]*$' | head -n1 || true)
  if (( ${r:-0} > rank )); then rank=$r; fi
done
if [[ -z "${MAX_LORA_RANK:-}" ]]; then
  MAX_LORA_RANK=64
  if (( rank > 512 )); then echo "adapter rank $rank is above vLLM's largest, 512" >&2; exit 2; fi
  if (( rank > 0 )); then
    for allowed in 1 8 16 32 64 128 256 320 512; do   # vllm.config.lora.MaxLoRARanks
      if (( allowed >= rank )); then MAX_LORA_RANK=$allowed; break; fi
    done
  fi
fi

args=(--port "$port" --dtype bfloat16 --tensor-parallel-size "${TP:-2}" --max-model-len "${MAX_LEN:-32768}"
      --api-key "$VLLM_API_KEY" --enable-lora --max-loras "$max_loras" --max-lora-rank "$MAX_LORA_RANK"
      --generation-config vllm    # sampling from each request (EMPA Table 7: 0.7 / 0.8), not the model's file
      --enable-prefix-caching     # a dialogue's next prompt extends its last one: only the new turn is prefilled
      --lora-modules "${adapters[@]}")
exec vllm serve Qwen/Qwen3-32B "${args[@]}"
