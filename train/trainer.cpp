#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <ostream>

#include "autograd/variable.h"
#include "ops/elementwise.h"
#include "ops/grad_norm.h"
#include "train/checkpoint/checkpoint.h"
#include "train/device_batch.h"
#include "train/device_choice.h"
#include "train/dist_data_parallel.h"
#include "train/graph_step.h"
#include "train/model_config.h"

namespace ft {

namespace {

LoaderOptions loader_options(const TrainConfig& cfg, const std::vector<std::string>& inputs, const std::string& split,
                             bool shuffle) {
  LoaderOptions o;
  o.inputs = inputs;
  o.split = split;
  o.batch_size = cfg.batch_size;
  o.seq_len = cfg.max_seq_len;
  o.shuffle = shuffle;
  o.seed = cfg.seed;
  o.vocab_size = static_cast<int32_t>(cfg.vocab_size);
  return o;
}

void print_data_parallel_header(std::ostream& out, DataParallel& dp, const TrainConfig& cfg, bool graph_allreduce) {
  out << "flashtrain: data parallel: " << dp.world_size() << " ranks (" << dp.comm().backend() << "), "
      << dp.world_size() * cfg.tokens_per_step() << " tokens per step in all, "
      << (dp.zero1() ? str("ZeRO-1 (optimizer state sharded; gradients reduce-scattered ",
                           dp.copy_engines() ? "on the copy engines during the backward, " : "",
                           cfg.grad_reduce_dtype == GradReduceDType::BF16 ? "in bf16" : "in fp32", ", ",
                           cfg.mixed_precision == MixedPrecision::FP32 ? "fp32 weights all-gathered"
                           : dp.gathers_on_copy_engines()               ? "the working copy all-gathered on the copy engines"
                                                                        : "the working copy all-gathered",
                           ")")
                     : str("gradients all-reduced in ", dp.grad_sync()->buckets().size(), " buckets of ~",
                           cfg.allreduce_bucket_mb, " MiB", dp.grad_sync()->overlap() ? " during backward" : "",
                           dp.grad_sync()->wire_dtype() == DType::BF16 ? " in bf16" : "",
                           graph_allreduce ? " (inside the last micro-step's CUDA graph)" : ""))
      << "\n";
  if (!dp.transport_note().empty()) out << "flashtrain: note: " << dp.transport_note() << "\n";
}

DataParallelOptions data_parallel_options(const TrainConfig& cfg, const AdamWConfig& adamw, std::ostream* log) {
  DataParallelOptions o;
  o.timeout_s = cfg.dist_timeout_s;
  o.bucket_mb = cfg.allreduce_bucket_mb;
  o.zero1 = cfg.zero1;
  o.grad_wire = cfg.grad_reduce_dtype == GradReduceDType::BF16 ? DType::BF16 : DType::F32;
  o.zero1_copy_engines = cfg.zero1_transport == Zero1Transport::CopyEngines ? DataParallelOptions::Want::Yes
                         : cfg.zero1_transport == Zero1Transport::Nccl      ? DataParallelOptions::Want::No
                                                                            : DataParallelOptions::Want::Auto;
  o.adamw = adamw;
  o.log = log;
  return o;
}

// A checkpoint's data position counts global steps of a given world size; another size cannot
// continue it exactly.
void check_world_size(const Json& extra, int world, const std::string& dir) {
  const Json* w = extra.is_object() ? extra.find("world_size") : nullptr;
  const int64_t saved = w && w->is_integer() ? w->as_int64() : 1;
  FT_CHECK_ARG(saved == world, "--resume: ", dir, " was written by a job of ", saved, " rank", saved == 1 ? "" : "s",
               ", this job has ", world, ": resume with the same world size (", saved, ")");
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Trainer::Trainer(const TrainConfig& cfg, const TrainerOptions& options)
    : cfg_(cfg),
      options_(options),
      device_(resolve_device(cfg)),
      scaler_(cfg.mixed_precision == MixedPrecision::FP16, cfg.loss_scale_init, cfg.loss_scale_growth_interval) {
  FT_CHECK_ARG(!(options.resume && !options.init_from.empty()), "[trainer] --resume and --init-from exclude each other");
  const DistEnv dist_env = detect_dist_env();
  if (dist_env.distributed()) device_ = rank_device(device_, dist_env);
  model_ = std::make_unique<nn::GPT>(gpt_config_from(cfg), cfg.seed);
  model_->to(device_);
  model_->train();
  arena_ = std::make_unique<ParamArena>(*model_, device_, compute_dtype(cfg.mixed_precision));
  AdamWConfig ac;
  ac.beta1 = cfg.betas[0];
  ac.beta2 = cfg.betas[1];
  ac.eps = cfg.eps;
  ac.weight_decay = cfg.weight_decay;
  ac.max_grad_norm = cfg.grad_clip;
  if (dist_env.distributed()) {
    dp_ = std::make_unique<DataParallel>(dist_env, device_, *arena_, *model_, data_parallel_options(cfg, ac, options.out));
    if (!dp_->is_root()) options_.out = nullptr;  // rank 0 alone prints
    model_->generator().set_lane(static_cast<uint64_t>(dp_->rank()));  // dropout masks differ per rank
  }
  step_timer_ = std::make_unique<StepTimer>(device_);
  if (!(dp_ && dp_->zero1())) optimizer_ = std::make_unique<AdamW>(*arena_, ac);  // ZeRO-1 keeps its own shard

  LoaderOptions train_lo = loader_options(cfg, cfg.train_data, "train", cfg.shuffle);
  train_lo.rank = dp_ ? dp_->rank() : 0;  // the rank's slice of each global batch (data/loader.h)
  train_lo.world_size = world_size();
  train_loader_ = std::make_unique<Loader>(train_lo);
  if (!cfg.val_data.empty()) val_loader_ = std::make_unique<Loader>(loader_options(cfg, cfg.val_data, "val", false));

  if (cfg.max_steps > 0) {
    total_steps_ = cfg.max_steps;
  } else {
    const int64_t per_epoch = static_cast<int64_t>(train_loader_->steps_per_epoch()) / cfg.gradient_accumulation_steps;
    FT_CHECK_ARG(per_epoch > 0, "config: train_data holds ", train_loader_->steps_per_epoch(), " batches of batch_size = ",
                 cfg.batch_size, ", fewer than gradient_accumulation_steps = ", cfg.gradient_accumulation_steps,
                 ": one optimizer step needs more data (or set max_steps)");
    total_steps_ = cfg.epochs * per_epoch;
  }
  schedule_ = LrSchedule::from_config(cfg, total_steps_);

  if (options.resume) {
    const auto latest = find_latest_checkpoint(cfg.out_dir);
    if (!latest) throw Error(str("--resume: ", cfg.out_dir, " holds no complete checkpoint (ckpt-<step>/)"));
    restore(*latest);
  } else {
    if (!options.init_from.empty()) {
      InitWeights init = load_hf_gpt2_for_init(options.init_from, Gpt2Dims::from_config(cfg));
      arena_->load_master(init.model);
      init_note_ = std::move(init.note);
    }
    // A fresh run replaces checkpoints of its own steps only; warn that older ones stay, since
    // --resume would pick the newest of them.
    const auto old = list_checkpoints(cfg.out_dir);
    if (options_.out && !old.empty())
      *options_.out << "flashtrain: note: " << cfg.out_dir << " holds checkpoints of an earlier run (newest: step "
                   << old.back().first << "); this run starts at step 0 and overwrites them only step by step\n";
  }
  if (dp_) dp_->share_initial_weights();  // every rank starts from rank 0's weights, bit for bit
  // A resumed run drops the metrics the interrupted run wrote after its checkpoint; a fresh run
  // starts the file over (step 0 keeps nothing of an earlier run's training rows).
  if (!dp_ || dp_->is_root())
    metrics_ = std::make_unique<MetricsLog>((std::filesystem::path(cfg.out_dir) / "metrics.jsonl").string(), step_);
  if (cfg.compile_model && device_.is_cuda()) {
    graph_step_ = std::make_unique<CapturedMicroStep>(*model_, device_, options_.out);
    // FLASHTRAIN_GRAPH_ALLREDUCE=1 (experimental): the last micro-step's graph holds the
    // all-reduces, overlapped with its backward pass. Off by default: on 2 and 4 H100s (session 12)
    // the overlapped backward ran 2-3 ms slower, as much as the overlap hid, so by default every
    // bucket is all-reduced after the replay, as before issue 20.
    // ZeRO-1 over the copy engines always goes into the graph: its copies overlap for free.
    const char* knob = std::getenv("FLASHTRAIN_GRAPH_ALLREDUCE");
    if (dp_ && ((knob && std::string(knob) == "1") || dp_->copy_engines())) {
      DataParallel* dp = dp_.get();
      StepTimer* timer = step_timer_.get();
      graph_step_->set_reduction({[dp] { dp->before_last_backward(); },
                                  [dp, timer](const Tensor& loss_sum) {
                                    timer->mark_backward_done();  // FLASHTRAIN_STEP_TIMING's split
                                    dp->after_backward(loss_sum);
                                  },
                                  [dp] { dp->after_graph_replay(); }});
    }
  }
}

Trainer::~Trainer() {
  // The captured graphs first: a graph that holds NCCL collectives (FLASHTRAIN_GRAPH_ALLREDUCE=1)
  // keeps a reference on the communicator, and ncclCommDestroy waits for it -- destroying the
  // communicator first hung every such run at exit.
  graph_step_.reset();
}

int Trainer::world_size() const { return dp_ ? dp_->world_size() : 1; }

void Trainer::restore(const std::string& dir) {
  const Checkpoint ckpt = load_checkpoint(dir);
  check_world_size(ckpt.state.extra, world_size(), dir);
  arena_->load_master(ckpt.model);
  if (optimizer_) optimizer_->load_state(ckpt.optimizer);
  else dp_->load_optimizer_state(ckpt.optimizer);
  step_ = ckpt.state.step;
  model_->generator().set_state(ckpt.state.rng);
  FT_CHECK_ARG(ckpt.state.data_position.is_string(), dir, "/state.json: data_position must be a string");
  train_loader_->seek(LoaderPosition::parse(ckpt.state.data_position.as_string()));
  scaler_.load_json(ckpt.state.loss_scaler);
  if (options_.out) {
    *options_.out << "flashtrain: resuming from " << dir << " (step " << step_ << " of " << total_steps_ << ")\n";
    if (ckpt.config != cfg_)
      *options_.out << "flashtrain: note: the config differs from the checkpoint's, so the run is not an exact "
                       "continuation of the interrupted one\n";
  }
}

double Trainer::train_step() {
  const int64_t A = cfg_.gradient_accumulation_steps;
  step_timer_->mark(StepTimer::kStart);
  arena_->zero_grads();
  if (graph_step_) graph_step_->begin_step();
  const Tensor loss_sum = graph_step_ ? graph_step_->loss_sum() : Tensor::zeros({1}, DType::F32, device_);
  for (int64_t a = 0; a < A; ++a) {
    if (graph_step_) {  // compile_model: the same micro-step, replayed from a CUDA graph
      graph_step_->run(train_loader_->next(), scaler_.scale(), a == A - 1);
      continue;
    }
    const DeviceBatch b = to_device(train_loader_->next(), device_);
    // The backward seed (fp16's loss scale, else 1; the loss is an f32 scalar) exists before the
    // forward: the head's one-pass loss writes dlogits for it (nn::GPT::forward's grad_scale_hint).
    const Tensor seed = Tensor::full({}, scaler_.scale(), DType::F32, device_);
    const nn::GPTOutput out = model_->forward(b.inputs, b.targets, b.tokens(), seed);
    {
      autograd::NoGradGuard no_grad;
      ops::add_(loss_sum, ops::cast(out.loss.detach(), DType::F32).reshape({1}));
    }
    if (dp_ && a == A - 1) dp_->before_last_backward();  // buckets all-reduce as this backward fills them
    autograd::backward(out.loss, seed);
  }
  // Data parallel: gradients and loss become sums over the W ranks; 1/W joins the scale below.
  // With compile_model the last micro-step did it (inside its graph).
  step_timer_->mark(StepTimer::kMicroSteps);
  if (dp_ && !(graph_step_ && graph_step_->reduces())) dp_->after_backward(loss_sum);
  step_timer_->mark(StepTimer::kReduced);
  const double W = world_size();
  // The loss goes to the host while the gradient norm runs: the host checks it (a non-finite loss
  // stops the run before the weights change) and queues AdamW before the norm ends, instead of the
  // GPU idling from the last micro-step's end until the host has read the loss and queued the rest.
  loss_readback_.request(loss_sum);
  const ops::GradNorm norm = dp_ ? dp_->grad_norm() : ops::grad_norm(arena_->grads());
  const double loss = loss_readback_.value() / (static_cast<double>(A) * W);
  if (!std::isfinite(loss)) throw Error(stop_message(loss));

  last_lr_ = schedule_.at(step_);
  const double grad_scale = 1.0 / (static_cast<double>(A) * scaler_.scale() * W);
  if (optimizer_) optimizer_->step(last_lr_, step_ + 1, grad_scale, norm.norm);
  else dp_->optimizer_step(last_lr_, step_ + 1, grad_scale, norm.norm);
  step_timer_->mark(StepTimer::kOptimized);
  if (scaler_.enabled() && !scaler_.update(norm.nonfinite.item() == 0.0)) ++skipped_steps_;
  ++step_;
  return loss;
}

std::string Trainer::stop_message(double loss) const {
  const auto ckpts = list_checkpoints(cfg_.out_dir);
  return str("non-finite training loss (", loss, ") at step ", step_ + 1, " of ", total_steps_,
             "; the run stops before updating the weights. ",
             ckpts.empty() ? std::string("No checkpoint was written yet.")
                           : str("The last good checkpoint is ", ckpts.back().second, " (step ", ckpts.back().first,
                                 "); lower lr or raise warmup_steps and --resume from it."));
}

EvalResult Trainer::evaluate() {
  FT_CHECK_ARG(val_loader_, "[trainer] evaluate needs val_data");
  return ft::evaluate(*model_, *val_loader_, cfg_.eval_steps, device_);
}

std::string Trainer::save_checkpoint() {
  Checkpoint c;
  c.config = cfg_;
  if (dp_) dp_->sync_master();  // collective, like the optimizer state below
  c.model = arena_->master_tensors();
  // ZeRO-1 gathers the full m and v (a collective: every rank gets here), so the format is one GPU's.
  c.optimizer = optimizer_ ? optimizer_->state_tensors() : dp_->optimizer_state();
  c.state.step = step_;
  c.state.rng = model_->generator().state();
  c.state.data_position = Json(train_loader_->position().to_string());
  c.state.loss_scaler = scaler_.to_json();
  c.state.extra = Json::object({{"tokens_seen", step_ * cfg_.tokens_per_step() * world_size()}});
  if (dp_) c.state.extra.set("world_size", Json(world_size()));
  if (dp_ && !dp_->is_root()) return "";  // rank 0 alone writes
  const std::string path = ft::save_checkpoint(cfg_.out_dir, c);
  prune_checkpoints(cfg_.out_dir, cfg_.keep_checkpoints);
  return path;
}

void Trainer::print_header(std::ostream& out) const {
  const char* dtype = to_string(cfg_.mixed_precision);
  out << "flashtrain: GPT-2 " << cfg_.n_layers << "L x " << cfg_.d_model << "C x " << cfg_.n_heads << "H"
      << (cfg_.n_kv_heads > 0 && cfg_.n_kv_heads != cfg_.n_heads ? str(" (", cfg_.n_kv_heads, " K/V heads)") : "")
      << ", " << arena_->num_parameters() << " parameters, " << dtype << ", attention "
      << (cfg_.use_flash_attention ? "flash" : "naive") << (cfg_.document_mask ? " (document mask)" : "") << ", on "
      << device_name(device_) << "\n";
  const std::string why = device_note(cfg_, device_);  // device: auto fell back to the CPU: why
  if (!why.empty()) out << "flashtrain: note: " << why << "\n";
  if (!init_note_.empty()) out << "flashtrain: " << init_note_ << "\n";
  out << "flashtrain: " << cfg_.batch_size << " x " << cfg_.max_seq_len << " tokens x " << cfg_.gradient_accumulation_steps
      << " micro-batches = " << cfg_.tokens_per_step() << " tokens per step, " << total_steps_ << " steps ("
      << train_loader_->steps_per_epoch() << " micro-batches per epoch), out_dir " << cfg_.out_dir << "\n";
  if (dp_) print_data_parallel_header(out, *dp_, cfg_, graph_step_ && graph_step_->reduces());
  if (cfg_.zero1 && !dp_) out << "flashtrain: note: zero1: true has no effect in a single-process run\n";
  if (cfg_.grad_reduce_dtype == GradReduceDType::BF16 && !dp_)
    out << "flashtrain: note: grad_reduce_dtype: bf16 applies to the data-parallel gradient sum only (single "
           "process)\n";
  if (cfg_.compile_model && !graph_step_)
    out << "flashtrain: compile_model: true is ignored on the CPU (CUDA graphs need a GPU); running eagerly\n";
  else if (graph_step_)
    out << "flashtrain: compile_model: the first micro-step runs eagerly (warm-up), then a micro-step is captured "
           "in a CUDA graph and replayed\n";
}

TrainSummary Trainer::run() {
  std::ostream* out = options_.out;
  if (out) print_header(*out);
  TrainSummary s;
  s.start_step = step_;
  const int64_t end = options_.stop_after >= 0 ? std::min(options_.stop_after, total_steps_) : total_steps_;
  if (out && step_ >= total_steps_) *out << "flashtrain: all " << total_steps_ << " steps are done already\n";

  const double flops_tok =
      flops_per_token(arena_->num_parameters(), cfg_.n_layers, cfg_.d_model, cfg_.max_seq_len);
  // MFU against the peak of the arithmetic the run does: tensor-core bf16/f16, or plain fp32.
  const double peak = !device_.is_cuda() ? -1
                      : cfg_.mixed_precision == MixedPrecision::FP32 ? peak_fp32_flops(device_name(device_))
                                                                      : peak_bf16_flops(device_name(device_));
  const auto t0 = std::chrono::steady_clock::now();
  auto last_log = t0;
  int64_t last_log_step = step_;
  while (step_ < end) {
    const double loss = train_step();
    s.losses.push_back(loss);
    const int64_t done = step_;
    if (done == 1 || done % cfg_.log_interval == 0 || done == total_steps_) {
      const double dt = seconds_since(last_log);
      // All ranks' tokens (world_size() x one rank's); MFU stays per GPU.
      const double tps =
          dt > 0 ? static_cast<double>((done - last_log_step) * cfg_.tokens_per_step() * world_size()) / dt : 0;
      if (metrics_) metrics_->log_train(done, loss, last_lr_, tps);
      if (out) {
        Progress p;
        p.step = done;
        p.total_steps = total_steps_;
        p.loss = loss;
        p.lr = last_lr_;
        p.tokens_per_s = tps;
        p.mfu = peak > 0 ? tps / world_size() * flops_tok / peak : -1;
        p.eta_s = eta_seconds(done - s.start_step, total_steps_ - s.start_step, seconds_since(t0));
        *out << format_progress(p);
        if (scaler_.enabled()) *out << " | scale " << scaler_.scale() << " (" << skipped_steps_ << " skipped)";
        *out << "\n" << std::flush;
      }
      last_log = std::chrono::steady_clock::now();
      last_log_step = done;
    }
    if (val_loader_ && cfg_.eval_interval > 0 && (done % cfg_.eval_interval == 0 || done == total_steps_)) {
      const EvalResult r = evaluate();
      if (metrics_) metrics_->log_eval(done, r.loss);
      s.val_loss = r.loss;
      if (out)
        *out << "step " << done << " | val loss " << std::fixed << std::setprecision(4) << r.loss << " | val ppl "
             << std::setprecision(2) << r.ppl << std::defaultfloat << std::setprecision(6) << "\n" << std::flush;
    }
    if ((cfg_.checkpoint_interval > 0 && done % cfg_.checkpoint_interval == 0) || done == total_steps_) {
      s.last_checkpoint = save_checkpoint();
      if (out) *out << "flashtrain: saved " << s.last_checkpoint << "\n" << std::flush;
    }
  }
  if (dp_) dp_->sync_master();  // callers read arena().master() after run()
  s.end_step = step_;
  s.seconds = seconds_since(t0);
  // Every rank's (FLASHTRAIN_STEP_TIMING): under data parallelism the ranks wait for each other
  // differently, and only rank 0 prints otherwise.
  const std::string timing = step_timer_->summary();
  if (out && !timing.empty()) *out << "flashtrain: " << timing << "\n" << std::flush;
  else if (dp_ && !timing.empty()) std::cout << str("flashtrain: rank ", dp_->rank(), ": ", timing, "\n") << std::flush;
  s.tokens_per_s = s.seconds > 0 ? static_cast<double>((s.end_step - s.start_step) * cfg_.tokens_per_step() *
                                                       world_size()) / s.seconds
                                 : 0;
  return s;
}

}  // namespace ft
