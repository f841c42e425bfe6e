#include "core/cuda/graph.h"

#include <cuda_runtime.h>

#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"

namespace ft::cuda {

Graph::Graph(int device) : device_(device) {
  context(device);  // the stream, handles and cuBLAS workspace exist before any capture
  pool_ = create_pool(device);
}

Graph::Graph(int device, PoolId pool) : device_(device), pool_(pool), owns_pool_(false) {
  context(device);
}

Graph::~Graph() {
  reset();
  if (owns_pool_) release_pool(device_, pool_);
}

void Graph::reset() {
  if (exec_) (void)cudaGraphExecDestroy(exec_);
  if (graph_) (void)cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  nodes_ = kernels_ = 0;
}

void Graph::capture(const std::function<void()>& body) {
  reset();
  const cudaStream_t stream = context(device_).stream;
  cudaGraph_t graph = nullptr;
  {
    PoolScope scope(device_, pool_);
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    try {
      body();
    } catch (...) {
      // Abandon the capture; its error, if any, is less telling than body's.
      if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw;
    }
    const cudaError_t err = cudaStreamEndCapture(stream, &graph);
    if (err != cudaSuccess || graph == nullptr) {
      if (graph) (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw Error(str("[cuda_graph] capture on cuda:", device_, " failed: ", cudaGetErrorName(err), " (",
                      cudaGetErrorString(err),
                      "); something in the captured code synchronised with the host or used another stream"));
    }
  }
  graph_ = graph;
  size_t n = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) CUDA_CHECK(cudaGraphGetNodes(graph_, nodes.data(), &n));
  nodes_ = static_cast<int64_t>(n);
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    kernels_ += type == cudaGraphNodeTypeKernel;
  }
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph_, 0));
  exec_ = exec;
  // Uploading now keeps the one-time setup out of the first replay's timing.
  CUDA_CHECK(cudaGraphUpload(exec_, stream));
}

void Graph::replay() const {
  FT_CHECK_ARG(exec_ != nullptr, "[cuda_graph] replay before a successful capture");
  CUDA_CHECK(cudaGraphLaunch(exec_, context(device_).stream));
}

}  // namespace ft::cuda
