// Private memory pools of the caching CUDA allocator, for CUDA graphs (like PyTorch's graph pools).
//
// A captured graph bakes in the addresses of every buffer it touched. Those blocks must stay
// reserved for the graph as long as it may be replayed, and must never be handed to other code
// meanwhile. So a capture runs inside a PoolScope: while it is alive, every allocation of that
// device on the calling thread comes from the pool's own free list (or a fresh cudaMalloc owned
// by the pool), and every block freed on this thread goes back to the pool -- including a block
// that was allocated outside the pool (the graph may have used it before the free, so it is
// adopted). A free inside the capture may be reused inside the capture: a graph captured from one
// stream replays in that stream's order. Allocations outside the scope never see pool blocks.
//
// release_pool ends a pool (when its graph is destroyed): its cached blocks join the general
// cache, and blocks still held by tensors return there when those are freed.
//
// No CUDA headers here: front-end code includes this in builds without CUDA.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ft::cuda {

using PoolId = uint64_t;  // 0 is the general cache

PoolId create_pool(int device);
void release_pool(int device, PoolId pool);
// Bytes the pool holds from the driver (in use by the graph or cached for it).
size_t pool_reserved_bytes(int device, PoolId pool);
// The pool active for `device` on the calling thread (0: none).
PoolId active_pool(int device);

// Makes `pool` the active pool of `device` on this thread for the scope's lifetime (nests).
class PoolScope {
 public:
  PoolScope(int device, PoolId pool);
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  int device_;
  PoolId prev_;
};

}  // namespace ft::cuda
