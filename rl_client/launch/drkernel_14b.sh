#!/usr/bin/env bash
# Dr. Kernel's 14B recipe (TRLOO + MRS + PR + PRS, 3 turns) on OpenRLHF 0.11.2, every reward from KernelGym.
#
#   KERNELGYM_URL=http://gym:8000 MODEL=/models/qwen3-14b-sft PROMPTS=prompts.jsonl \
#     rl_client/launch/drkernel_14b.sh [more train_ppo_ray or --kernelgym.* arguments]
#
# Needs a GPU machine with openrlhf[vllm]==0.11.2 (flash-attn, deepspeed, ray, vllm) and this repository installed
# (every Ray worker imports rl_client). PROMPTS comes from `kernelgym-rl openrlhf-prompts`. Later arguments override
# earlier ones; `--kernelgym.dry_run` prints what would run and starts nothing. See docs/rl.md.
set -euo pipefail

: "${KERNELGYM_URL:?set KERNELGYM_URL to the KernelGym service (the agent scores every turn there)}"
: "${MODEL:?set MODEL to the policy checkpoint (a Hugging Face directory)}"
: "${PROMPTS:?set PROMPTS to the prompt dataset written by kernelgym-rl openrlhf-prompts}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-runs/drkernel-14b}"
NODES="${NODES:-1}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
MAX_LEN="${MAX_LEN:-18432}"  # the whole 3-turn trajectory; Dr. Kernel's per-turn context limit

# The agent's configuration reaches every Ray worker through the job's runtime environment.
export KERNELGYM_URL
export KERNELGYM_RL_MAX_TURNS="${KERNELGYM_RL_MAX_TURNS:-3}"
export KERNELGYM_RL_TIMEOUT_S="${KERNELGYM_RL_TIMEOUT_S:-2400}"

exec "${PYTHON:-python3}" -m rl_client.openrlhf_train \
    --actor.model_name_or_path "$MODEL" \
    --train.agent_func_path "$ROOT/rl_client/openrlhf_agent.py" \
    --data.prompt_dataset "$PROMPTS" \
    --data.input_key prompt \
    --data.label_key label \
    --data.apply_chat_template \
    --data.max_len "$MAX_LEN" \
    --rollout.max_new_tokens 8192 \
    --rollout.batch_size 16 \
    --rollout.n_samples_per_prompt 16 \
    --rollout.micro_batch_size 4 \
    --rollout.temperature 1.0 \
    --rollout.top_p 1.0 \
    --train.batch_size 256 \
    --train.micro_batch_size 1 \
    --train.max_epochs 1 \
    --train.num_episodes "${EPISODES:-1}" \
    --algo.advantage.estimator trloo \
    --algo.advantage.gamma 1.0 \
    --algo.kl.init_coef 0 \
    --algo.advantage.is_correction_level seq \
    --algo.advantage.is_correction_mode mask \
    --algo.advantage.is_correction_gating ratio \
    --algo.advantage.is_correction_threshold 0.999 1.001 \
    --kernelgym.token_veto 1e-4 \
    --kernelgym.prs_threshold 0.3 \
    --kernelgym.prs_ramp 0.1 \
    --algo.dynamic_filtering_enable \
    --algo.dynamic_filtering_range 0.0 2.5 \
    --actor.adam.lr 1e-6 \
    --actor.lr_scheduler constant \
    --actor.eps_clip_low_high 0.2 0.28 \
    --actor.dual_clip 3.0 \
    --actor.max_norm 1.0 \
    --actor.loss_agg_mode token-mean \
    --actor.num_nodes "$NODES" \
    --actor.num_gpus_per_node "$GPUS_PER_NODE" \
    --vllm.num_engines "$((NODES * GPUS_PER_NODE))" \
    --vllm.tensor_parallel_size 1 \
    --vllm.gpu_memory_utilization 0.6 \
    --vllm.enable_sleep \
    --train.colocate_all \
    --ds.enable_sleep \
    --ds.zero_stage 3 \
    --ds.adam_offload \
    --ds.param_dtype bf16 \
    --ds.packing_samples \
    --actor.gradient_checkpointing_enable \
    --ckpt.path "$OUT/checkpoints" \
    --ckpt.output_dir "$OUT/final" \
    --ckpt.save_steps 10 \
    --ckpt.save_hf \
    --logger.tensorboard_dir "$OUT/tensorboard" \
    "$@"
