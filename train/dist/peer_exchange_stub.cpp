// Builds without NCCL (FT_NCCL off): no GPUs to exchange between, said when asked for.
#include "core/error.h"
#include "train/dist/peer_exchange.h"

namespace ft {

struct PeerExchange::Impl {};

PeerExchange::PeerExchange(Communicator&, const Tensor&) {
  throw Error("[dist] built without NCCL: the copy-engine exchange needs a build with -DFT_NCCL=ON");
}
PeerExchange::~PeerExchange() = default;
void PeerExchange::release() {}
void PeerExchange::sends_wait_for_compute() {}
void PeerExchange::send(int, int64_t, const void*, int64_t) {}
void PeerExchange::compute_waits_for_sends() {}

}  // namespace ft
