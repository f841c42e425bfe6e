#include "train/dist/peer_exchange.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "core/cuda/check.h"
#include "core/device.h"
#include "core/error.h"

namespace ft {

namespace {

// What a rank tells the others about its inbox: the IPC handle of the allocation holding it, the
// inbox's offset inside that allocation, and a hash of the host name (IPC maps only within a host).
struct Card {
  cudaIpcMemHandle_t handle;
  int64_t offset;
  uint64_t host;
};
constexpr int64_t kCardFloats = (sizeof(Card) + 3) / 4;

// The allocation that holds `p` (the caching allocator hands out pieces of larger ones; IPC exports
// whole allocations). cuMemGetAddressRange is a driver call, reached through the runtime.
void allocation_of(const void* p, CUdeviceptr& base, size_t& size) {
  static const auto fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status{};
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault, &status);
    FT_CHECK_ARG(err == cudaSuccess && status == cudaDriverEntryPointSuccess && f != nullptr,
                 "[dist] the CUDA driver has no cuMemGetAddressRange: ", cudaGetErrorString(err));
    return reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(f);
  }();
  const CUresult r = fn(&base, &size, reinterpret_cast<CUdeviceptr>(p));
  FT_CHECK_ARG(r == CUDA_SUCCESS, "[dist] cuMemGetAddressRange failed (", static_cast<int>(r), ")");
}

uint64_t host_hash() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return std::hash<std::string>{}(name);
}

// Copies go round-robin over a few streams in pieces of at least kMinPiece bytes: one stream's
// copies run one after another on one copy engine, several use several (FLASHTRAIN_PEER_COPY_STREAMS
// sets how many, 1-8; default kDefaultStreams).
constexpr int kDefaultStreams = 4;
constexpr int64_t kMinPiece = int64_t{1} << 20;

int streams_from_env() {
  const char* v = std::getenv("FLASHTRAIN_PEER_COPY_STREAMS");
  if (v == nullptr || *v == '\0') return kDefaultStreams;
  const int n = std::atoi(v);
  FT_CHECK_ARG(n >= 1 && n <= 8, "[dist] FLASHTRAIN_PEER_COPY_STREAMS=", v, ": expected 1 to 8");
  return n;
}

}  // namespace

struct PeerExchange::Impl {
  int rank = 0, world = 1;
  cudaStream_t compute = nullptr;
  cudaEvent_t compute_mark = nullptr;
  std::vector<cudaStream_t> copies;
  std::vector<cudaEvent_t> copies_mark;
  int next = 0;  // the stream of the next piece
  std::vector<void*> mapped;     // per rank: the peer's allocation as mapped here (null for this rank)
  std::vector<char*> peer_inbox; // per rank: the peer's inbox
};

PeerExchange::PeerExchange(Communicator& comm, const Tensor& inbox) : impl_(std::make_unique<Impl>()), inbox_(inbox) {
  Impl& s = *impl_;
  s.rank = comm.rank(), s.world = comm.world_size();
  const Device device = inbox.device();
  FT_CHECK_ARG(device.is_cuda() && inbox.is_contiguous(), "[dist] the copy-engine exchange needs a contiguous CUDA inbox");
  CUDA_CHECK(cudaSetDevice(device.index));
  s.compute = stream_for(device);
  CUDA_CHECK(cudaEventCreateWithFlags(&s.compute_mark, cudaEventDisableTiming));
  s.copies.assign(streams_from_env(), nullptr);
  s.copies_mark.assign(s.copies.size(), nullptr);
  for (size_t i = 0; i < s.copies.size(); ++i) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.copies[i], cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.copies_mark[i], cudaEventDisableTiming));
  }

  // A rank that cannot export its inbox still takes part in the exchange below (with a card no one
  // maps), so that every rank reaches the same verdict instead of waiting for it.
  std::string failure;
  Card mine{};
  mine.host = host_hash();
  try {
    CUdeviceptr base = 0;
    size_t size = 0;
    allocation_of(inbox.data_ptr(), base, size);
    const cudaError_t err = cudaIpcGetMemHandle(&mine.handle, reinterpret_cast<void*>(base));
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear it
      failure = str("rank ", s.rank, " cannot export its GPU memory (", cudaGetErrorString(err), ")");
    }
    mine.offset = static_cast<int64_t>(reinterpret_cast<uintptr_t>(inbox.data_ptr()) - base);
  } catch (const Error& e) {
    failure = e.what();
  }
  Tensor card = Tensor::zeros({kCardFloats}, DType::F32, Device::cpu());
  std::memcpy(card.data_ptr(), &mine, sizeof mine);
  const Tensor cards = Tensor::empty({kCardFloats * s.world}, DType::F32, device);
  comm.comm_waits_for_compute();
  comm.all_gather(card.to(device), cards);
  comm.compute_waits_for_comm();
  const Tensor all = cards.to(Device::cpu());
  s.mapped.assign(s.world, nullptr);
  s.peer_inbox.assign(s.world, nullptr);
  for (int q = 0; q < s.world && failure.empty(); ++q) {
    Card c{};
    std::memcpy(&c, static_cast<const float*>(all.data_ptr()) + q * kCardFloats, sizeof c);
    if (c.host != mine.host) {
      failure = str("rank ", q, " is on another host");
      break;
    }
    if (q == s.rank) continue;
    const cudaError_t err = cudaIpcOpenMemHandle(&s.mapped[q], c.handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear it
      s.mapped[q] = nullptr;
      failure = str("rank ", s.rank, " cannot map rank ", q, "'s GPU memory (", cudaGetErrorString(err), ")");
      break;
    }
    s.peer_inbox[q] = static_cast<char*>(s.mapped[q]) + c.offset;
  }
  // Every rank must come to the same answer (a rank that cannot map its peers fails alone): one
  // sum of the failures.
  const Tensor failed = Tensor::full({1}, failure.empty() ? 0.0 : 1.0, DType::F32, device);
  comm.comm_waits_for_compute();
  comm.all_reduce_sum_(failed);
  comm.compute_waits_for_comm();
  if (failed.to_floats()[0] != 0.f) {
    release();
    throw Error(str("[dist] the copy-engine exchange is not possible here: ",
                    failure.empty() ? "another rank could not export or map GPU memory" : failure));
  }
}

void PeerExchange::release() {
  if (!impl_) return;
  Impl& s = *impl_;
  for (cudaStream_t c : s.copies) cudaStreamSynchronize(c);
  for (void* p : s.mapped)
    if (p) cudaIpcCloseMemHandle(p);
  cudaEventDestroy(s.compute_mark);
  for (size_t i = 0; i < s.copies.size(); ++i) {
    cudaEventDestroy(s.copies_mark[i]);
    cudaStreamDestroy(s.copies[i]);
  }
  impl_.reset();
}

PeerExchange::~PeerExchange() { release(); }

void PeerExchange::sends_wait_for_compute() {
  CUDA_CHECK(cudaEventRecord(impl_->compute_mark, impl_->compute));
  for (cudaStream_t c : impl_->copies) CUDA_CHECK(cudaStreamWaitEvent(c, impl_->compute_mark, 0));
}

void PeerExchange::send(int to, int64_t offset, const void* src, int64_t bytes) {
  Impl& s = *impl_;
  FT_ASSERT(to >= 0 && to < s.world && to != s.rank, "send to rank ", to);
  const int64_t n = static_cast<int64_t>(s.copies.size());
  const int64_t pieces = std::max<int64_t>(1, std::min(n, bytes / kMinPiece));
  const int64_t piece = (bytes / pieces + 15) / 16 * 16;
  for (int64_t at = 0; at < bytes; at += piece) {
    const int64_t len = std::min(piece, bytes - at);
    CUDA_CHECK(cudaMemcpyAsync(s.peer_inbox[to] + offset + at, static_cast<const char*>(src) + at,
                               static_cast<size_t>(len), cudaMemcpyDeviceToDevice, s.copies[s.next]));
    s.next = (s.next + 1) % static_cast<int>(n);
  }
}

void PeerExchange::compute_waits_for_sends() {
  Impl& s = *impl_;
  for (size_t i = 0; i < s.copies.size(); ++i) {
    CUDA_CHECK(cudaEventRecord(s.copies_mark[i], s.copies[i]));
    CUDA_CHECK(cudaStreamWaitEvent(s.compute, s.copies_mark[i], 0));
  }
}

}  // namespace ft
