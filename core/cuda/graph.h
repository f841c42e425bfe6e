// A CUDA graph captured from a device's stream, with the private allocator pool its memory comes
// from (core/cuda/allocator_pool.h). The graph and the pool live and die together: a replay reads
// and writes exactly the blocks the capture used, and nobody else is handed those meanwhile.
//
//   cuda::Graph g(device);
//   g.capture([&] { ...ops on the device's stream, as in eager mode... });  // runs nothing
//   g.replay();                                                             // runs it all
//
// The capture uses cudaStreamCaptureModeRelaxed, so a first-use cudaMalloc (a fresh pool block)
// or a lazily loaded kernel does not invalidate it. What the captured code must not do is read
// back from the device (it would read before anything ran) or copy from pageable host memory;
// either makes capture() throw. Kernel arguments are frozen at capture: values that change from
// replay to replay must be read by the kernels from device memory that the caller rewrites,
// in stream order, before each replay.
//
// No CUDA headers here (cudaGraph_t and cudaGraphExec_t are these opaque pointer types), so
// front-end code includes this in builds without CUDA, where every call throws.
#pragma once

#include <cstdint>
#include <functional>

#include "core/cuda/allocator_pool.h"

struct CUgraph_st;
struct CUgraphExec_st;

namespace ft::cuda {

class Graph {
 public:
  explicit Graph(int device);
  // Captures into `pool`, which the caller made (create_pool) and releases after every graph that
  // uses it is gone. Graphs may share a pool when they are replayed one after another on the
  // device's stream and none leaves a pool block in use for another to read: each capture then
  // reuses the blocks the previous ones freed, and the pool holds the largest graph's memory,
  // not the sum (CapturedMicroStep's plain and reducing micro-steps).
  Graph(int device, PoolId pool);
  ~Graph();  // destroys the graph, then releases the pool if it made it
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Captures what `body` issues on the device's stream (with the pool active on this thread) and
  // instantiates it. On any error (from body or from CUDA) the capture is abandoned, the graph
  // stays empty and the error propagates. A second capture replaces the first.
  void capture(const std::function<void()>& body);
  // Launches the graph on the device's stream (asynchronous, like any op).
  void replay() const;

  bool captured() const { return exec_ != nullptr; }
  int device() const { return device_; }
  PoolId pool() const { return pool_; }
  int64_t num_nodes() const { return nodes_; }
  int64_t num_kernels() const { return kernels_; }  // kernel nodes (cuBLAS's included)

 private:
  void reset();

  int device_;
  PoolId pool_ = 0;
  bool owns_pool_ = true;
  CUgraph_st* graph_ = nullptr;
  CUgraphExec_st* exec_ = nullptr;
  int64_t nodes_ = 0, kernels_ = 0;
};

}  // namespace ft::cuda
