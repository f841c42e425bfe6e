# Sourced by bench/train/scaling.sh and the data-parallel probes (bench/train/dev/copy_engine_call.sh,
# pair_probe_call.sh): the flashtrain options of the GPT-2-small run they all time -- T = 1024,
# B = 16 a GPU, one micro-batch a step, bf16, CUDA, no evaluation or checkpoints, shards from
# DATA_DIR. Each caller adds its own --set options after these (zero1, compile_model, ...).
#   gpt2_dp_args STEPS LOG_INTERVAL OUT_DIR DATA_DIR   sets the array GPT2_DP_ARGS
gpt2_dp_args() {
  GPT2_DP_ARGS=(--set max_seq_len=1024 --set batch_size=16 --set gradient_accumulation_steps=1
    --set max_steps="$1" --set log_interval="$2" --set eval_interval=0 --set checkpoint_interval=0
    --set keep_checkpoints=1 --set mixed_precision=bf16 --set device=cuda --set out_dir="$3"
    --set train_data="$4/train_*.bin" --set val_data="$4/val_*.bin")
}
