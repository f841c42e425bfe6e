// Built instead of core/cuda/graph.cpp and the allocator's pools when FT_CUDA is off.
#include "core/cuda/graph.h"
#include "core/error.h"

namespace ft::cuda {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(str("[", what, "] flashtrain was built without CUDA (configure with -DFT_CUDA=ON)"));
}
}  // namespace

PoolId create_pool(int) { no_cuda("cuda_allocator"); }
void release_pool(int, PoolId) {}
size_t pool_reserved_bytes(int, PoolId) { return 0; }
PoolId active_pool(int) { return 0; }
PoolScope::PoolScope(int device, PoolId) : device_(device), prev_(0) { no_cuda("cuda_allocator"); }
PoolScope::~PoolScope() = default;

Graph::Graph(int device) : device_(device) { no_cuda("cuda_graph"); }
Graph::Graph(int device, PoolId) : device_(device) { no_cuda("cuda_graph"); }
Graph::~Graph() = default;
void Graph::reset() {}
void Graph::capture(const std::function<void()>&) { no_cuda("cuda_graph"); }
void Graph::replay() const { no_cuda("cuda_graph"); }

}  // namespace ft::cuda
