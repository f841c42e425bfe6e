#include "train/zero1.h"

#include <algorithm>
#include <cstdlib>

#include "autograd/variable.h"
#include "ops/adamw.h"
#include "ops/elementwise.h"

namespace ft {

Zero1::Layout Zero1::layout(int64_t N, int64_t W, int64_t rounds) {
  Layout l;
  l.rounds = std::max<int64_t>(1, std::min<int64_t>(rounds, N / (16 * W)));  // chunks of at least 16
  l.chunk = N / (16 * W * l.rounds) * 16;
  l.tail = N - l.rounds * W * l.chunk;
  return l;
}

namespace {
int rounds_from_env(int rounds) {
  if (rounds > 0) return rounds;
  const char* env = std::getenv("FLASHTRAIN_ZERO1_ROUNDS");
  if (!env || !*env) return Zero1::kDefaultRounds;
  char* end = nullptr;
  const long k = std::strtol(env, &end, 10);
  FT_CHECK_ARG(*end == '\0' && k >= 1 && k <= 1024, "[zero1] FLASHTRAIN_ZERO1_ROUNDS=", env,
               " is not a whole number of rounds in 1..1024");
  return static_cast<int>(k);
}
}  // namespace

Zero1::Zero1(ParamArena& arena, const AdamWConfig& cfg, Communicator& comm, DType wire, int rounds)
    : arena_(arena), cfg_(cfg), comm_(comm) {
  const int64_t W = comm.world_size();
  layout_ = layout(arena.numel(), W, rounds_from_env(rounds));
  FT_CHECK_ARG(layout_.chunk > 0, "[zero1] the arena (", arena.numel(), " elements) is too small to shard over ", W,
               " ranks");
  FT_CHECK_ARG(wire == DType::F32 || wire == DType::BF16, "[zero1] the gradient wire dtype is f32 or bf16, got ", wire);
  const int64_t state = shard_numel() + tail_numel();
  m_ = Tensor::zeros({state}, DType::F32, arena.device());
  v_ = Tensor::zeros({state}, DType::F32, arena.device());
  if (wire == DType::BF16) wire_ = Tensor::zeros({prefix()}, DType::BF16, arena.device());
  init_fp32_sync();
}

void Zero1::init_fp32_sync() {
  if (!arena_.working().defined()) return;  // fp32: step() gathers the whole master anyway
  int64_t begin = prefix(), end = 0;        // the span of the sharded prefix that fp32 leaves touch
  for (const ParamArena::Entry& e : arena_.entries()) {
    if (!e.stays_fp32 || e.offset >= prefix()) continue;
    begin = std::min(begin, e.offset);
    end = std::max(end, std::min(prefix(), e.offset + shape_numel(e.shape)));
  }
  if (begin >= end) return;
  const int64_t c = layout_.chunk, W = comm_.world_size();
  std::vector<float> own(static_cast<size_t>(end - begin), 0.f), keep(own.size(), 1.f);
  for (const ParamArena::Entry& e : arena_.entries()) {
    if (!e.stays_fp32) continue;
    for (int64_t x = e.offset; x < std::min(prefix(), e.offset + shape_numel(e.shape)); ++x) {
      keep[x - begin] = 0.f;
      own[x - begin] = (x % (W * c)) / c == comm_.rank() ? 1.f : 0.f;
    }
  }
  fp32_begin_ = begin;
  fp32_own_ = Tensor::from_vector(own, {end - begin}).to(arena_.device());
  fp32_keep_ = Tensor::from_vector(keep, {end - begin}).to(arena_.device());
}

void Zero1::sync_fp32_leaves() {
  if (!fp32_own_.defined()) return;
  Tensor span = arena_.master().slice(0, fp32_begin_, fp32_begin_ + fp32_own_.numel());
  // Each element of an fp32 leaf from its owner, zeros from the rest: the sum is the owner's value.
  const Tensor owned = ops::mul(span, fp32_own_);
  comm_.comm_waits_for_compute();
  comm_.all_reduce_sum_(owned);
  comm_.compute_waits_for_comm();
  // The span's other elements (other tensors' masters, partial on purpose) stay as they are.
  span.copy_(ops::add(ops::mul(span, fp32_keep_), owned));
}

std::vector<Zero1::Range> Zero1::update_ranges() const {
  std::vector<Range> out;
  const int64_t c = layout_.chunk;
  for (int64_t k = 0; k < layout_.rounds; ++k) out.push_back({owned_begin(k), owned_begin(k) + c, k * c});
  if (tail_numel() > 0) out.push_back({prefix(), arena_.numel(), shard_numel()});
  return out;
}

void Zero1::use_copy_engines() {
  const int64_t W = comm_.world_size();
  const DType wire = wire_.defined() ? wire_.dtype() : DType::F32;
  auto exchange = std::make_unique<PeerExchange>(comm_, Tensor::zeros({(W - 1) * shard_numel()}, wire, arena_.device()));
  // The working copy's all-gather on the copy engines too (every rank's working copy is the inbox),
  // at two ranks: there it took 0.3 ms off a GPT-2-small step's norm-and-optimizer phase on 2 H200s
  // (0.2-0.25 ms off the step), while at four, where each rank copies its slice three times, NCCL's
  // all-gather was 0.15 ms faster (zero1.h).
  std::unique_ptr<PeerExchange> gather;
  if (arena_.working().defined() && W == 2) gather = std::make_unique<PeerExchange>(comm_, arena_.working());
  exchange_ = std::move(exchange);
  gather_ = std::move(gather);
  barrier_ = Tensor::zeros({1}, DType::F32, arena_.device());
}

void Zero1::barrier_after_sends(PeerExchange& exchange, const Tensor& sum) {
  exchange.compute_waits_for_sends();
  comm_.comm_waits_for_compute();
  comm_.all_reduce_sum_(sum);
  comm_.compute_waits_for_comm();
}

void Zero1::send_ready(int64_t begin, int64_t end) {
  autograd::NoGradGuard no_grad;
  const int64_t r = comm_.rank(), W = comm_.world_size(), c = layout_.chunk;
  // The bf16 wire: the range rounded into its slice of wire_ on the compute stream first.
  const Tensor& from = wire_.defined() ? wire_ : arena_.grads();
  const int64_t elem = wire_.defined() ? 2 : 4;
  if (wire_.defined() && begin < prefix())
    ops::cast_into(wire_.slice(0, begin, std::min(end, prefix())), arena_.grads().slice(0, begin, std::min(end, prefix())));
  const auto* g = static_cast<const char*>(from.data_ptr());
  exchange_->sends_wait_for_compute();
  // Rank q's chunk of round k is [(k W + q) c, + c); the parts of it in [begin, end) go to q.
  for (int64_t k = begin / (W * c); k < layout_.rounds && round_begin(k) < end; ++k)
    for (int64_t q = 0; q < W; ++q) {
      if (q == r) continue;
      const int64_t cb = (k * W + q) * c, b = std::max(begin, cb), e = std::min(end, cb + c);
      if (b >= e) continue;
      const int64_t at = (inbox_offset(inbox_slot(q, r), k) + (b - cb)) * elem;
      exchange_->send(static_cast<int>(q), at, g + b * elem, (e - b) * elem);
    }
}

void Zero1::reduce_gradients() {
  autograd::NoGradGuard no_grad;
  const int64_t r = comm_.rank(), c = layout_.chunk;
  const Tensor& g = arena_.grads();
  if (exchange_) {
    // The tail's all-reduce is the collective after every rank's copies (one element without a tail).
    barrier_after_sends(*exchange_, tail_numel() > 0 ? g.slice(0, prefix(), arena_.numel()) : barrier_);
    return;  // the received shards: added by grad_norm() as it reads the owned chunks
  }
  for (int64_t k = 0; k < layout_.rounds; ++k) {
    const int64_t b = round_begin(k), e = round_begin(k + 1);
    const Tensor round = wire_.defined() ? wire_.slice(0, b, e) : g.slice(0, b, e);
    if (wire_.defined()) ops::cast_into(round, g.slice(0, b, e));  // on the compute stream
    comm_.comm_waits_for_compute();
    comm_.reduce_scatter_sum(round, round.slice(0, r * c, (r + 1) * c));
  }
  if (tail_numel() > 0) comm_.all_reduce_sum_(g.slice(0, prefix(), arena_.numel()));
  comm_.compute_waits_for_comm();
  if (wire_.defined())
    for (const Range& rg : update_ranges())
      if (rg.begin < prefix()) ops::cast_into(g.slice(0, rg.begin, rg.end), wire_.slice(0, rg.begin, rg.end));
}

ops::GradNorm Zero1::grad_norm() {
  autograd::NoGradGuard no_grad;
  const int64_t r = comm_.rank(), W = comm_.world_size(), c = layout_.chunk;
  const Tensor& g = arena_.grads();
  std::vector<Tensor> mine;
  std::vector<std::vector<Tensor>> received;  // over the copy engines: the inbox's shards of each owned chunk
  for (const Range& rg : update_ranges()) {
    if (rg.begin >= prefix() && r != W - 1) continue;  // the tail counted once
    mine.push_back(g.slice(0, rg.begin, rg.end));
    received.emplace_back();
    if (!exchange_ || rg.begin >= prefix()) continue;
    const int64_t k = round_of(rg);
    for (int64_t slot = 0; slot + 1 < W; ++slot)
      received.back().push_back(exchange_->inbox().slice(0, inbox_offset(slot, k), inbox_offset(slot, k) + c));
  }
  // The other ranks' shards are summed into the owned chunks (in slot order, add_'s bits) as the
  // norm reads them: one pass where an add pass and a norm pass read the chunks twice.
  const Tensor local = ops::add_then_grad_norm(mine, received).norm;  // (1)
  const Tensor norms = Tensor::empty({W}, DType::F32, arena_.device());
  comm_.comm_waits_for_compute();
  comm_.all_gather(local, norms);
  comm_.compute_waits_for_comm();
  // sqrt(sum_r norm_r^2): the norm of the vector of norms. inf/NaN anywhere stays inf/NaN.
  return ops::grad_norm(norms);
}

void Zero1::step(double lr, int64_t step, double grad_scale, const Tensor& grad_norm) {
  autograd::NoGradGuard no_grad;
  ops::AdamWOptions o = adamw_options(cfg_, lr, step, grad_scale, grad_norm);
  const Tensor& working = arena_.working();
  for (const Range& rg : update_ranges()) {
    for (const bool decay : {true, false}) {
      const ParamArena::Region reg = decay ? arena_.decay_region() : arena_.no_decay_region();
      const int64_t b = std::max(rg.begin, reg.begin), e = std::min(rg.end, reg.end);
      if (b >= e) continue;
      o.weight_decay = decay ? static_cast<float>(cfg_.weight_decay) : 0.f;
      const int64_t sb = rg.state_offset + (b - rg.begin), se = sb + (e - b);
      ops::adamw_step(arena_.master().slice(0, b, e), arena_.grads().slice(0, b, e), m_.slice(0, sb, se),
                      v_.slice(0, sb, se), o, working.defined() ? working.slice(0, b, e) : Tensor());
    }
    // Padding between the regions' tensors is zero in master, grads, m and v, so an update of a
    // range that spans padding leaves it zero (param_arena.h). The round's working copy goes out
    // while AdamW updates the next round (the tail, last, is every rank's own): copied into every
    // other rank's working copy on the copy engines, or all-gathered by NCCL.
    if (working.defined() && rg.begin < prefix()) {
      const int64_t k = round_of(rg);
      if (gather_) {
        const int64_t elem = static_cast<int64_t>(dtype_size(working.dtype()));
        const char* mine = static_cast<const char*>(working.data_ptr()) + rg.begin * elem;
        gather_->sends_wait_for_compute();
        for (int64_t q = 0; q < comm_.world_size(); ++q)
          if (q != comm_.rank()) gather_->send(static_cast<int>(q), rg.begin * elem, mine, (rg.end - rg.begin) * elem);
      } else {
        comm_.comm_waits_for_compute();
        comm_.all_gather(working.slice(0, rg.begin, rg.end), working.slice(0, round_begin(k), round_begin(k + 1)));
      }
    }
  }
  master_partial_ = true;
  if (!working.defined()) {
    gather_master();  // fp32 compute: the model reads master itself
    return;
  }
  // Copy engines: the collective after every rank's copies says every copy into this rank's
  // working copy has landed, before the next forward reads it.
  if (gather_) barrier_after_sends(*gather_, barrier_);
  else comm_.compute_waits_for_comm();
  sync_fp32_leaves();
}

void Zero1::gather_master() {
  if (!master_partial_) return;
  const Tensor& master = arena_.master();
  comm_.comm_waits_for_compute();
  for (int64_t k = 0; k < layout_.rounds; ++k)
    comm_.all_gather(master.slice(0, owned_begin(k), owned_begin(k) + layout_.chunk),
                     master.slice(0, round_begin(k), round_begin(k + 1)));
  comm_.compute_waits_for_comm();
  master_partial_ = false;
}

std::vector<NamedTensor> Zero1::state_tensors() {
  // Gathered piece by piece into host tensors, so a checkpoint adds only 2 (W + 1) pieces of device
  // memory, not two full (N) tensors: a ZeRO-1 run's peak stays that of its training steps.
  constexpr int64_t kPiece = int64_t{1} << 22;  // elements per rank and round trip (16 MiB)
  const int64_t W = comm_.world_size(), N = arena_.numel(), chunk = layout_.chunk;
  // At most a quarter chunk per piece, so the (W + 1) pieces stay below the m and v memory saved.
  const int64_t c = std::min(kPiece, std::max<int64_t>(16, chunk / 4));
  const Tensor in = Tensor::empty({c}, DType::F32, arena_.device());
  const Tensor gathered = Tensor::empty({W * c}, DType::F32, arena_.device());
  std::vector<NamedTensor> out;
  for (const auto& [name, state] : {std::pair<const char*, const Tensor*>{"adamw.m", &m_}, {"adamw.v", &v_}}) {
    Tensor full = Tensor::zeros({N}, DType::F32, Device::cpu());
    for (int64_t k = 0; k < layout_.rounds; ++k) {
      for (int64_t at = 0; at < chunk; at += c) {
        const int64_t len = std::min(c, chunk - at);  // the same on every rank
        in.slice(0, 0, len).copy_(state->slice(0, k * chunk + at, k * chunk + at + len));
        comm_.comm_waits_for_compute();
        comm_.all_gather(in.slice(0, 0, len), gathered.slice(0, 0, W * len));
        comm_.compute_waits_for_comm();
        const Tensor host = gathered.slice(0, 0, W * len).to(Device::cpu());
        for (int64_t q = 0; q < W; ++q) {
          const int64_t dst = (k * W + q) * chunk + at;  // rank q's chunk of round k
          full.slice(0, dst, dst + len).copy_(host.slice(0, q * len, (q + 1) * len));
        }
      }
    }
    if (tail_numel() > 0)
      full.slice(0, prefix(), N).copy_(state->slice(0, shard_numel(), shard_numel() + tail_numel()).to(Device::cpu()));
    out.push_back({name, full});
  }
  return out;
}

void Zero1::load_state(const std::vector<NamedTensor>& tensors) {
  int found = 0;
  const int64_t N = arena_.numel();
  for (const NamedTensor& t : tensors) {
    Tensor* dst = t.name == "adamw.m" ? &m_ : t.name == "adamw.v" ? &v_ : nullptr;
    if (!dst) continue;
    FT_CHECK_ARG(t.tensor.numel() == N && t.tensor.dtype() == DType::F32, "[zero1] checkpoint tensor '", t.name,
                 "' is ", t.tensor.dtype(), " ", t.tensor.shape(), ", the arena needs f32 (", N, ")");
    const Tensor flat = t.tensor.reshape({N});
    for (const Range& rg : update_ranges())
      dst->slice(0, rg.state_offset, rg.state_offset + (rg.end - rg.begin)).copy_(flat.slice(0, rg.begin, rg.end));
    ++found;
  }
  FT_CHECK_ARG(found == 2, "[zero1] the optimizer state needs adamw.m and adamw.v, found ", found, " of them");
}

}  // namespace ft
