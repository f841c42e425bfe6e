// Data parallelism (issue 7) on the CPU: ranks are forked processes of this test binary, each with
// its own Trainer, joined through a real Rendezvous on 127.0.0.1 and the CpuCommunicator. The
// references are independent: one process with the whole global batch, a run without ZeRO-1, an
// uninterrupted run. GPU twins (NCCL, bf16) are in data_parallel_cuda_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/variable.h"
#include "core/half.h"
#include "data_parallel_test_util.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "train/checkpoint/checkpoint.h"
#include "train/dist/cpu_communicator.h"
#include "train/dist_data_parallel.h"
#include "train/grad_sync.h"
#include "train/trainer.h"
#include "train/zero1.h"
#include "trainer_test_util.h"

namespace ft {
namespace {

using test::RankRun;
using test::run_ranks;
using test::run_single;

std::string fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("ft_dp_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

TrainConfig dp_config(const std::string& dir, int64_t global_batch, int world) {
  TrainConfig c = test::synthetic_config(dir);
  c.batch_size = global_batch / world;
  c.max_steps = 6;
  c.dist_timeout_s = 30;
  c.allreduce_bucket_mb = 0.01;  // several buckets even for the tiny model, so overlap is exercised
  return c;
}

// ---- the autograd hook GradSync is built on ----

TEST(GradReadyHook, FiresOnceAfterTheLastContributionOfALeafUsedTwice) {
  const Tensor w = Tensor::from_floats({1, 2, 3}, {3}, DType::F32);
  autograd::set_requires_grad(w);
  const Tensor x = Tensor::from_floats({1, 1, 1}, {3}, DType::F32);
  const Tensor z = Tensor::from_floats({10, 10, 10}, {3}, DType::F32);
  int calls = 0;
  std::vector<float> seen;
  autograd::set_grad_ready_hook(w, [&] {
    ++calls;
    seen = autograd::grad(w).to_floats();
  });
  // w is used twice (like GPT-2's tied wte): d/dw = x + z = 11 per element.
  const Tensor loss = autograd::add(autograd::sum(autograd::mul(w, x), 0), autograd::sum(autograd::mul(w, z), 0));
  autograd::backward(loss);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<float>{11, 11, 11}));
  autograd::set_grad_ready_hook(w, nullptr);
  autograd::backward(autograd::sum(autograd::mul(w, x), 0));
  EXPECT_EQ(calls, 1);  // removed
}

// A world of one that records, at launch time, what each all-reduce was given.
class RecordingComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  const char* backend() const override { return "recording"; }
  void all_reduce_sum_(const Tensor& t) override { launches.push_back({t.offset(), t.to_floats()}); }
  void reduce_scatter_sum(const Tensor&, const Tensor&) override {}
  void all_gather(const Tensor&, const Tensor&) override {}
  void comm_waits_for_compute() override {}
  void compute_waits_for_comm() override {}
  void barrier() override {}
  std::vector<std::pair<int64_t, std::vector<float>>> launches;
};

TEST(GradSync, BucketsTileTheArenaAndLaunchDuringBackwardWithFinalGradients) {
  const std::string dir = fresh_dir("gradsync");
  TrainConfig cfg = test::synthetic_config(dir);
  Trainer trainer(cfg);  // single process: its arena and model, no data parallelism
  RecordingComm comm;
  GradSync sync(trainer.arena(), trainer.model(), comm, /*bucket_mb=*/0.005);
  const auto& buckets = sync.buckets();
  ASSERT_GE(buckets.size(), 3u);
  int64_t at = 0;
  for (const auto& b : buckets) {
    EXPECT_EQ(b.begin, at);
    EXPECT_GT(b.end, b.begin);
    at = b.end;
  }
  EXPECT_EQ(at, trainer.arena().numel());

  // One training step by hand: hooks armed for the backward pass.
  trainer.arena().zero_grads();
  Loader loader([&] {
    LoaderOptions o;
    o.inputs = cfg.train_data;
    o.batch_size = cfg.batch_size;
    o.seq_len = cfg.max_seq_len;
    o.vocab_size = static_cast<int32_t>(cfg.vocab_size);
    return o;
  }());
  const Batch b = loader.next();
  const Tensor tokens = Tensor::from_vector(std::vector<int32_t>(b.tokens, b.tokens + b.B * (b.T + 1)), {b.B, b.T + 1});
  const Tensor inputs = tokens.slice(1, 0, b.T).contiguous(), targets = tokens.slice(1, 1, b.T + 1).contiguous();
  const nn::GPTOutput out = trainer.model().forward(inputs, targets, b.B * b.T);
  sync.arm();
  autograd::backward(out.loss);
  const size_t early = comm.launches.size();
  sync.finish();
  EXPECT_EQ(static_cast<size_t>(sync.launched_during_backward()), early);
  EXPECT_GE(early, buckets.size() - 1) << "every bucket whose parameters all got a gradient launches in backward";
  ASSERT_EQ(comm.launches.size(), buckets.size());
  // Each bucket once, and what it was given at launch is the final gradient (nothing added later:
  // the tied wte's bucket waited for its second contribution).
  const std::vector<float> final_grads = trainer.arena().grads().to_floats();
  std::vector<int> seen(buckets.size(), 0);
  for (const auto& [offset, values] : comm.launches) {
    size_t k = 0;
    while (k < buckets.size() && buckets[k].begin != offset) ++k;
    ASSERT_LT(k, buckets.size());
    ++seen[k];
    const std::vector<float> expect(final_grads.begin() + buckets[k].begin, final_grads.begin() + buckets[k].end);
    EXPECT_EQ(values, expect) << "bucket " << k << " was launched before its gradients were final";
  }
  for (int s : seen) EXPECT_EQ(s, 1);
  std::filesystem::remove_all(dir);
}

// grad_reduce_dtype: bf16 -- each bucket goes out rounded to bf16, and what comes back (here the
// "sum" of a world of one: the bucket itself) is widened into the fp32 arena.
TEST(GradSync, Bf16WireRoundsEachBucketAndWidensTheSumBackIntoTheArena) {
  const std::string dir = fresh_dir("gradsync_bf16");
  TrainConfig cfg = test::synthetic_config(dir);
  Trainer trainer(cfg);
  RecordingComm comm;
  GradSync sync(trainer.arena(), trainer.model(), comm, /*bucket_mb=*/0.005, DType::BF16);
  EXPECT_EQ(sync.wire_dtype(), DType::BF16);
  trainer.arena().zero_grads();
  const Tensor tokens = Tensor::from_vector(std::vector<int32_t>(8 * 17, 3), {8, 17});
  const Tensor inputs = tokens.slice(1, 0, 16).contiguous(), targets = tokens.slice(1, 1, 17).contiguous();
  const nn::GPTOutput out = trainer.model().forward(inputs, targets, 8 * 16);
  sync.arm();
  autograd::backward(out.loss);
  const std::vector<float> fp32 = trainer.arena().grads().to_floats();
  sync.finish();
  ASSERT_EQ(comm.launches.size(), sync.buckets().size());
  std::vector<float> rounded(fp32.size());
  for (size_t i = 0; i < fp32.size(); ++i) rounded[i] = bf16_to_float(float_to_bf16(fp32[i]));
  for (const auto& [offset, values] : comm.launches) {
    ASSERT_GE(offset, 0);
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(values[i], rounded[static_cast<size_t>(offset) + i]) << "element " << offset + i << " went out unrounded";
  }
  EXPECT_EQ(trainer.arena().grads().to_floats(), rounded);
  EXPECT_NE(rounded, fp32) << "the test wants gradients that bf16 does not hold exactly";
  std::filesystem::remove_all(dir);
}

// ---- the CPU communicator over a real rendezvous: 3 ranks, sums checked against hand sums ----

// Forks 3 ranks that each join a rendezvous, build a CpuCommunicator and run `body(comm, rank)`:
// 0 means right (then a barrier), anything else is the test's error code, listed in `codes`. Waits
// up to 30 s for each rank; a hung rank is killed.
void expect_three_cpu_ranks_pass(const std::function<int(CpuCommunicator&, int)>& body, const char* codes) {
  const std::vector<pid_t> pids = test::dp_detail::fork_ranks(3, [&body](int rank) {
    const DistEnv env = detect_dist_env();
    Rendezvous rdv(env, 20);
    CpuCommunicator comm(rdv);
    const int code = body(comm, rank);
    if (code == 0) comm.barrier();
    return code;
  });
  for (size_t r = 0; r < pids.size(); ++r) {
    const int st = test::dp_detail::wait_until(pids[r], std::chrono::steady_clock::now() + std::chrono::seconds(30));
    EXPECT_EQ(st, 0) << "rank " << r << " (" << codes << "; -1: hung)";
    if (st == -1) ::kill(pids[r], SIGKILL);
  }
}

TEST(CpuCommunicator, AllReduceReduceScatterInPlaceAndAllGatherOnThreeRanks) {
  expect_three_cpu_ranks_pass([](CpuCommunicator& comm, int rank) {
    const int W = comm.world_size();
    // Rank r holds x_r[i] = (r + 1) * 1000 + i; the sum over ranks is 6000 + 3 i.
    const int64_t n = 5;
    Tensor x = Tensor::empty({W * n}, DType::F32);
    for (int64_t i = 0; i < W * n; ++i) x.data<float>()[i] = static_cast<float>((rank + 1) * 1000 + i);
    Tensor y = x.clone();
    comm.all_reduce_sum_(y);
    for (int64_t i = 0; i < W * n; ++i)
      if (y.data<float>()[i] != static_cast<float>(6000 + 3 * i)) return 10;
    // In place: out is x's own rank-th slice.
    comm.reduce_scatter_sum(x, x.slice(0, rank * n, (rank + 1) * n));
    for (int64_t i = 0; i < n; ++i)
      if (x.data<float>()[rank * n + i] != static_cast<float>(6000 + 3 * (rank * n + i))) return 11;
    // In-place all-gather brings every rank's reduced slice back: x is now the full sum.
    comm.all_gather(x.slice(0, rank * n, (rank + 1) * n), x);
    for (int64_t i = 0; i < W * n; ++i)
      if (x.data<float>()[i] != static_cast<float>(6000 + 3 * i)) return 12;
    return 0;
  }, "10: all-reduce, 11: reduce-scatter, 12: all-gather wrong");
}

// bf16 all-reduce: the widened values are summed in fp32 and rounded once. Element 0 shows the
// single rounding: 1 + 2^-8 + 2^-8 = 1 + 2^-7 is a bf16, while rounding after each addition
// (1 + 2^-8 -> 1 by round-to-even) would give 1.
TEST(CpuCommunicator, Bf16AllReduceSumsInFp32AndRoundsOnceOnThreeRanks) {
  expect_three_cpu_ranks_pass([](CpuCommunicator& comm, int rank) {
    const Tensor x = Tensor::from_floats({rank == 0 ? 1.0f : 0.00390625f, 3.0f, -0.5f * static_cast<float>(rank)}, {3},
                                         DType::F32);
    const Tensor y = ops::cast(x, DType::BF16);
    comm.all_reduce_sum_(y);
    if (y.dtype() != DType::BF16) return 13;
    const std::vector<float> got = y.to_floats();
    if (got != std::vector<float>{1.0078125f, 9.0f, -1.5f}) return 10;
    return 0;
  }, "10: wrong sum");
}

// bf16 reduce-scatter (in place) and all-gather: the reduce-scatter sums like the all-reduce (fp32,
// one rounding: element 0 of rank 0's slice is 1 + 2^-7, not 1), the all-gather moves the bf16 bits.
TEST(CpuCommunicator, Bf16ReduceScatterAndAllGatherOnThreeRanks) {
  expect_three_cpu_ranks_pass([](CpuCommunicator& comm, int rank) {
    const int64_t n = 2;
    std::vector<float> mine(3 * n);
    for (int64_t i = 0; i < 3 * n; ++i) mine[i] = static_cast<float>(rank + 1) * static_cast<float>(i + 1);
    mine[0] = rank == 0 ? 1.0f : 0.00390625f;
    const Tensor x = ops::cast(Tensor::from_floats(mine, {3 * n}, DType::F32), DType::BF16);
    comm.reduce_scatter_sum(x, x.slice(0, rank * n, (rank + 1) * n));
    if (x.dtype() != DType::BF16) return 13;
    // Sum over ranks of (r + 1) (i + 1) is 6 (i + 1); element 0 is 1 + 2^-8 + 2^-8.
    std::vector<float> sum(3 * n);
    for (int64_t i = 0; i < 3 * n; ++i) sum[i] = 6.f * static_cast<float>(i + 1);
    sum[0] = 1.0078125f;
    const std::vector<float> got = x.to_floats();
    for (int64_t i = 0; i < n; ++i)
      if (got[rank * n + i] != sum[rank * n + i]) return 10;
    comm.all_gather(x.slice(0, rank * n, (rank + 1) * n), x);
    if (x.to_floats() != sum) return 12;
    return 0;
  }, "10: reduce-scatter, 12: all-gather wrong");
}

TEST(DataParallel, MoreLocalRanksThanGpusIsAnErrorNamingBoth) {
  DistEnv env;
  env.rank = env.local_rank = cuda_device_count();  // one past the last GPU of this host
  env.world_size = env.rank + 1;
  try {
    rank_device(Device::cuda(0), env);
    FAIL() << "local rank " << env.local_rank << " on a host with " << cuda_device_count() << " GPUs must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("local rank " + std::to_string(env.local_rank)), std::string::npos) << e.what();
  }
  EXPECT_EQ(rank_device(Device::cpu(), env), Device::cpu()) << "CPU ranks share the CPU";
}

// ---- two ranks against one ----

TEST(DataParallel, TwoRanksOfBEqualOneRankOf2B) {
  const std::string dir = fresh_dir("equal");
  const TrainConfig one = dp_config(dir, 8, 1);
  TrainConfig two = dp_config(dir, 8, 2);
  two.out_dir = dir + "/run2";
  const RankRun ref = run_single(one, {});
  const std::vector<RankRun> ranks = run_ranks(two, 2, {});
  ASSERT_EQ(ranks.size(), 2u);
  for (const RankRun& r : ranks) ASSERT_EQ(r.status, 0) << r.error;
  ASSERT_EQ(ref.losses.size(), 6u) << ref.error;
  ASSERT_EQ(ranks[0].losses.size(), 6u) << ranks[0].error;
  ASSERT_EQ(ranks[1].losses.size(), 6u) << ranks[1].error;
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    EXPECT_NEAR(ranks[0].losses[i], ref.losses[i], 2e-5 * std::fabs(ref.losses[i])) << "step " << i + 1;
    EXPECT_EQ(ranks[1].losses[i], ranks[0].losses[i]) << "every rank logs the same global loss";
  }
  EXPECT_EQ(ranks[0].master, ranks[1].master) << "the replicas must stay bit-identical";
  const double diff = max_abs_diff(ranks[0].master, ref.master);
  EXPECT_LT(diff, 1e-4) << "2 x B vs 1 x 2B, to all-reduce rounding";
  std::cout << "2 ranks x B vs 1 x 2B after 6 steps: max |param diff| " << diff << "\n";
  // Only rank 0 wrote: its checkpoint and metrics exist, and nothing else in out_dir names rank 1.
  EXPECT_TRUE(std::filesystem::exists(two.out_dir + "/ckpt-6/model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(two.out_dir + "/metrics.jsonl"));
  std::filesystem::remove_all(dir);
}

// grad_reduce_dtype: bf16 on 2 ranks (with or without zero1) against the fp32 reference of one
// process with the whole batch: the same to bf16 rounding of the summed gradients (Adam divides by
// sqrt(v), so a relative 2^-9 on a gradient is a relative 2^-9 on its update, except where a
// near-zero gradient flips sign); rounding something (the same run with an fp32 wire is closer);
// replicas identical, since every rank widens the same bf16 sum.
void expect_bf16_wire_within_rounding(const std::string& dir, bool zero1) {
  const TrainConfig one = dp_config(dir, 8, 1);
  TrainConfig two = dp_config(dir, 8, 2);
  two.zero1 = zero1;
  two.out_dir = dir + "/bf16";
  two.grad_reduce_dtype = GradReduceDType::BF16;
  TrainConfig fp32 = two;
  fp32.out_dir = dir + "/fp32";
  fp32.grad_reduce_dtype = GradReduceDType::FP32;
  const RankRun ref = run_single(one, {});
  const std::vector<RankRun> ranks = run_ranks(two, 2, {});
  const std::vector<RankRun> wide = run_ranks(fp32, 2, {});
  for (const RankRun& r : ranks) ASSERT_EQ(r.status, 0) << r.error;
  for (const RankRun& r : wide) ASSERT_EQ(r.status, 0) << r.error;
  ASSERT_EQ(ranks[0].losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(ranks[0].losses[i], ref.losses[i], 2e-3 * std::fabs(ref.losses[i])) << "step " << i + 1;
  EXPECT_EQ(ranks[0].master, ranks[1].master) << "every rank widens the same bf16 sum: replicas stay identical";
  const double d_bf16 = max_abs_diff(ranks[0].master, ref.master);
  const double d_fp32 = max_abs_diff(wide[0].master, ref.master);
  std::cout << (zero1 ? "ZeRO-1, " : "") << "2 ranks x B vs 1 x 2B after 6 steps, max |param diff|: bf16 wire "
            << d_bf16 << ", fp32 wire " << d_fp32 << " (lr " << two.lr << ")\n";
  EXPECT_GT(d_bf16, d_fp32) << "the bf16 wire must round something (else the option did nothing)";
  EXPECT_LT(d_bf16, 6 * two.lr) << "more than an lr-sized step per step off: not just rounding";
}

TEST(DataParallel, TwoRanksOfBWithBf16GradientReductionMatchOneRankOf2BToBf16Rounding) {
  const std::string dir = fresh_dir("bf16wire");
  expect_bf16_wire_within_rounding(dir, false);
  std::filesystem::remove_all(dir);
}

// The same with zero1: the reduce-scatter in bf16, widened into the owned slice.
TEST(DataParallel, ZeroOneWithBf16ReduceScatterMatchesOneRankOf2BToBf16Rounding) {
  const std::string dir = fresh_dir("zero1wire");
  expect_bf16_wire_within_rounding(dir, true);
  std::filesystem::remove_all(dir);
}

// `plain` on 2 ranks (out_dir dir/plain) into a, the same with zero1 (dir/zero1) into b.
void run_plain_and_zero1(TrainConfig plain, const std::string& dir, std::vector<RankRun>& a, std::vector<RankRun>& b) {
  plain.out_dir = dir + "/plain";
  TrainConfig z = plain;
  z.out_dir = dir + "/zero1";
  z.zero1 = true;
  a = run_ranks(plain, 2, {});
  b = run_ranks(z, 2, {});
  for (const RankRun& r : a) ASSERT_EQ(r.status, 0) << r.error;
  for (const RankRun& r : b) ASSERT_EQ(r.status, 0) << r.error;
}

TEST(DataParallel, ZeroOneGivesTheSameParametersAsPlainDataParallel) {
  const std::string dir = fresh_dir("zero1");
  TrainConfig plain = dp_config(dir, 8, 2);
  plain.grad_clip = 0.5;  // exercise the global norm from the shards
  std::vector<RankRun> a, b;
  run_plain_and_zero1(plain, dir, a, b);
  if (HasFatalFailure()) return;
  EXPECT_EQ(b[0].master, b[1].master) << "the all-gather leaves every rank the same weights";
  EXPECT_LT(max_abs_diff(b[0].master, a[0].master), 1e-5);
  for (size_t i = 0; i < a[0].losses.size(); ++i) EXPECT_NEAR(b[0].losses[i], a[0].losses[i], 1e-5) << i;
  // The ZeRO-1 checkpoint is in the one-GPU format: full (N) m and v, equal to plain DP's.
  const Checkpoint cz = load_checkpoint(dir + "/zero1/ckpt-6"), cp = load_checkpoint(dir + "/plain/ckpt-6");
  ASSERT_EQ(cz.optimizer.size(), cp.optimizer.size());
  for (size_t i = 0; i < cz.optimizer.size(); ++i) {
    EXPECT_EQ(cz.optimizer[i].name, cp.optimizer[i].name);
    EXPECT_LT(max_abs_diff(cz.optimizer[i].tensor.to_floats(), cp.optimizer[i].tensor.to_floats()), 1e-6)
        << cz.optimizer[i].name;
  }
  std::filesystem::remove_all(dir);
}

// Mixed precision: ZeRO-1 all-gathers the bf16 working copy each step instead of the fp32 master
// (zero1.h), and makes the master whole only when run() ends and before each checkpoint. Without
// clipping 2 ranks add the same two values in either design and AdamW is elementwise, so the
// weights, the losses and the checkpoints (weights, m and v) must equal plain data parallelism's
// bit for bit -- in bf16 with one round (a contiguous slice per rank) and with four, and in fp16
// (an f16 working copy, the loss scaler's skipped steps included), and in bf16 with the LayerNorms'
// parameters kept fp32 (layernorm_fp32: their leaves are masters, synced from their owners each
// step, zero1.h).
TEST(DataParallel, ZeroOneUnderMixedPrecisionEqualsPlainDataParallelBitForBit) {
  struct Case {
    const char* rounds;
    MixedPrecision precision;
    bool layernorm_fp32;
  };
  for (const Case& k : {Case{"1", MixedPrecision::BF16, false}, Case{"4", MixedPrecision::BF16, false},
                        Case{"4", MixedPrecision::FP16, false}, Case{"1", MixedPrecision::BF16, true},
                        Case{"4", MixedPrecision::BF16, true}}) {
    const char* rounds = k.rounds;
    SCOPED_TRACE(std::string("FLASHTRAIN_ZERO1_ROUNDS=") + rounds + " " + to_string(k.precision) +
                 (k.layernorm_fp32 ? " layernorm_fp32" : ""));
    const std::string dir =
        fresh_dir(std::string("zero1mp-") + rounds + to_string(k.precision) + (k.layernorm_fp32 ? "ln32" : ""));
    TrainConfig plain = dp_config(dir, 8, 2);
    plain.mixed_precision = k.precision;
    plain.layernorm_fp32 = k.layernorm_fp32;
    plain.grad_clip = 0;
    plain.checkpoint_interval = 3;
    std::vector<RankRun> a, b;
    ::setenv("FLASHTRAIN_ZERO1_ROUNDS", rounds, 1);  // the forked ranks inherit it
    run_plain_and_zero1(plain, dir, a, b);
    ::unsetenv("FLASHTRAIN_ZERO1_ROUNDS");
    if (HasFatalFailure()) return;
    EXPECT_EQ(b[0].master, b[1].master) << "run() ends with every rank's master whole";
    EXPECT_EQ(b[0].master, a[0].master);
    EXPECT_EQ(b[0].losses, a[0].losses) << "every rank computed with the same working copy as plain DP";
    for (const char* ckpt : {"/ckpt-3", "/ckpt-6"}) {
      const Checkpoint cz = load_checkpoint(dir + "/zero1" + ckpt), cp = load_checkpoint(dir + "/plain" + ckpt);
      ASSERT_EQ(cz.model.size(), cp.model.size());
      for (size_t i = 0; i < cz.model.size(); ++i)
        EXPECT_EQ(cz.model[i].tensor.to_floats(), cp.model[i].tensor.to_floats()) << ckpt << " " << cz.model[i].name;
      ASSERT_EQ(cz.optimizer.size(), cp.optimizer.size());
      for (size_t i = 0; i < cz.optimizer.size(); ++i)
        EXPECT_EQ(cz.optimizer[i].tensor.to_floats(), cp.optimizer[i].tensor.to_floats())
            << ckpt << " " << cz.optimizer[i].name;
    }
    std::filesystem::remove_all(dir);
  }
}

// A bad FLASHTRAIN_ZERO1_ROUNDS stops every rank before training with a message naming it.
TEST(DataParallel, ZeroOneRefusesABadRoundsSettingNamingIt) {
  const std::string dir = fresh_dir("zero1rounds");
  TrainConfig z = dp_config(dir, 8, 2);
  z.zero1 = true;
  for (const char* bad : {"0", "four", "4x", "5000"}) {
    ::setenv("FLASHTRAIN_ZERO1_ROUNDS", bad, 1);
    const std::vector<RankRun> ranks = run_ranks(z, 2, {});
    ::unsetenv("FLASHTRAIN_ZERO1_ROUNDS");
    for (const RankRun& r : ranks) {
      EXPECT_NE(r.status, 0) << bad;
      EXPECT_NE(r.error.find(std::string("FLASHTRAIN_ZERO1_ROUNDS=") + bad), std::string::npos) << r.error;
    }
  }
  std::filesystem::remove_all(dir);
}

// The shard layout: K rounds of W chunks of c (a multiple of 16) elements, then the tail; fewer
// rounds where the arena cannot give every chunk 16 elements.
TEST(Zero1, LayoutCutsRoundsOfChunksAndATail) {
  const Zero1::Layout a = Zero1::layout(1000, 3, 4);
  EXPECT_EQ(a.rounds, 4);
  EXPECT_EQ(a.chunk, 80);  // floor(1000 / 192) * 16
  EXPECT_EQ(a.tail, 40);   // 1000 - 4 * 3 * 80
  const Zero1::Layout b = Zero1::layout(100, 2, 4);
  EXPECT_EQ(b.rounds, 3);  // 100 / 32
  EXPECT_EQ(b.chunk, 16);
  EXPECT_EQ(b.tail, 4);
  const Zero1::Layout c = Zero1::layout(40, 3, 4);
  EXPECT_EQ(c.rounds, 1);
  EXPECT_EQ(c.chunk, 0) << "too small to shard: the constructor refuses it";
}

TEST(DataParallel, AccumulationOverTwoMicroBatchesMatchesOneProcess) {
  const std::string dir = fresh_dir("accum");
  TrainConfig one = dp_config(dir, 8, 1);
  one.gradient_accumulation_steps = 2;
  TrainConfig two = dp_config(dir, 8, 2);
  two.gradient_accumulation_steps = 2;
  two.out_dir = dir + "/run2";
  const RankRun ref = run_single(one, {});
  const std::vector<RankRun> ranks = run_ranks(two, 2, {});
  for (const RankRun& r : ranks) ASSERT_EQ(r.status, 0) << r.error;
  ASSERT_EQ(ranks[0].losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(ranks[0].losses[i], ref.losses[i], 2e-5 * std::fabs(ref.losses[i])) << "step " << i + 1;
  EXPECT_LT(max_abs_diff(ranks[0].master, ref.master), 1e-4);
  std::filesystem::remove_all(dir);
}

TEST(DataParallel, ZeroOneOnThreeRanksWithAnUnevenTailMatchesOneProcess) {
  const std::string dir = fresh_dir("zero1w3");
  TrainConfig one = dp_config(dir, 12, 1);
  TrainConfig three = dp_config(dir, 12, 3);
  three.zero1 = true;
  three.out_dir = dir + "/run3";
  const RankRun ref = run_single(one, [](Trainer& t) {
    // The shard split of 3 ranks: the tail is what every rank updates itself.
    const Zero1::Layout l = Zero1::layout(t.arena().numel(), 3, Zero1::kDefaultRounds);
    return std::vector<float>{static_cast<float>(l.tail)};
  });
  ASSERT_GT(ref.probe.at(0), 0) << "the test wants a non-empty tail";
  const std::vector<RankRun> ranks = run_ranks(three, 3, {});
  for (const RankRun& r : ranks) ASSERT_EQ(r.status, 0) << r.error;
  EXPECT_EQ(ranks[0].master, ranks[2].master);
  EXPECT_LT(max_abs_diff(ranks[1].master, ref.master), 1e-4);
  std::filesystem::remove_all(dir);
}

TEST(DataParallel, DropoutMasksDifferPerRankAndRankZeroMatchesOneProcess) {
  const std::string dir = fresh_dir("dropout");
  TrainConfig c = dp_config(dir, 8, 2);
  c.dropout = 0.1;
  c.max_steps = 1;
  // Each rank draws a mask from its model's generator on the same input.
  const auto probe = [](Trainer& t) {
    const Tensor ones = Tensor::full({64, 64}, 1.0, DType::F32);
    return ops::dropout(ones, 0.5f, t.model().generator().next(ops::kDropoutOffsets)).to_floats();
  };
  const std::vector<RankRun> ranks = run_ranks(c, 2, probe);
  for (const RankRun& r : ranks) ASSERT_EQ(r.status, 0) << r.error;
  TrainConfig one = dp_config(dir, 8, 1);
  one.dropout = 0.1;
  one.max_steps = 1;
  one.out_dir = dir + "/one";
  const RankRun ref = run_single(one, probe);
  ASSERT_EQ(ranks[0].probe.size(), 4096u);
  EXPECT_NE(ranks[0].probe, ranks[1].probe) << "the rank must be folded into the Philox offset";
  EXPECT_EQ(ranks[0].probe, ref.probe) << "rank 0 draws what one process draws";
  std::filesystem::remove_all(dir);
}

// A 2-rank run of `c` cut after step 3 (stop_after: its checkpoint at 3 is written, nothing after)
// and resumed on 2 ranks repeats steps 4-6 bit for bit (plain, or ZeRO-1 under mixed precision,
// whose checkpoint must gather the master and m / v from the ranks' chunks).
void expect_two_rank_resume_bit_exact(const std::string& dir, TrainConfig c, const TrainerOptions& resume) {
  c.dropout = 0.1;  // masks per rank must resume too
  c.checkpoint_interval = 3;
  c.out_dir = dir + "/full";
  const std::vector<RankRun> full = run_ranks(c, 2, {});
  for (const RankRun& r : full) EXPECT_EQ(r.status, 0) << r.error;
  c.out_dir = dir + "/cut";
  TrainerOptions stop;
  stop.stop_after = 3;
  for (const RankRun& r : run_ranks(c, 2, {}, stop)) EXPECT_EQ(r.status, 0) << r.error;
  const std::vector<RankRun> rest = run_ranks(c, 2, {}, resume);
  for (const RankRun& r : rest) EXPECT_EQ(r.status, 0) << r.error;
  EXPECT_EQ(rest[0].losses.size(), 3u);
  for (size_t i = 0; i < 3 && i < rest[0].losses.size() && 3 + i < full[0].losses.size(); ++i)
    EXPECT_EQ(rest[0].losses[i], full[0].losses[3 + i]) << "step " << 4 + i;
  EXPECT_EQ(rest[0].master, full[0].master);
}

TEST(DataParallel, ZeroOneUnderMixedPrecisionResumesOnTwoRanksBitExactly) {
  const std::string dir = fresh_dir("resume-z1");
  TrainConfig c = dp_config(dir, 8, 2);
  c.zero1 = true;
  c.mixed_precision = MixedPrecision::BF16;
  TrainerOptions resume;
  resume.resume = true;
  expect_two_rank_resume_bit_exact(dir, c, resume);
  std::filesystem::remove_all(dir);
}

TEST(DataParallel, CheckpointOfTwoRanksResumesOnTwoRanksBitExactly) {
  const std::string dir = fresh_dir("resume");
  const TrainConfig c = dp_config(dir, 8, 2);
  TrainerOptions resume;
  resume.resume = true;
  expect_two_rank_resume_bit_exact(dir, c, resume);
  if (HasFailure()) return;

  // A single process cannot continue it: the message names both world sizes.
  TrainConfig single = dp_config(dir, 8, 1);
  single.out_dir = dir + "/cut";
  try {
    Trainer t(single, resume);
    FAIL() << "resuming a 2-rank checkpoint on 1 rank must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 ranks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("this job has 1"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(DataParallel, KillingOneRankEndsTheOtherWithinTheTimeoutNamingIt) {
  const std::string dir = fresh_dir("kill");
  TrainConfig c = dp_config(dir, 8, 2);
  c.max_steps = 1000000;  // runs until killed
  c.dist_timeout_s = 5;
  const auto t0 = std::chrono::steady_clock::now();
  const test::KillResult k = test::run_ranks_and_kill(c, 2, /*victim=*/1, /*after_s=*/1.5, /*wait_s=*/20);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(k.survivor_status, 0) << "the surviving rank must fail, not hang or succeed";
  EXPECT_FALSE(k.survivor_timed_out) << "rank 0 was still running " << 20 << " s after rank 1 died";
  EXPECT_NE(k.survivor_stderr.find("rank 1"), std::string::npos) << k.survivor_stderr;
  EXPECT_LT(took, 20);
  std::cout << "rank 0 after rank 1 was killed (" << took << " s): status " << k.survivor_status << ", " << k.survivor_stderr;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ft
