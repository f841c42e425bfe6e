// A second stream of a device, ordered against the device's own stream (the one every op runs
// on) by events, so that independent work runs beside the main stream's. Eagerly and inside a
// graph capture alike: there fork() and join() become the graph's edges, and the side stream's
// work becomes a branch of the graph that runs while the main branch does.
// CapturedMicroStep zeroes the gradient buffer on one while the forward runs (train/graph_step.h).
//
// No CUDA headers here, so front-end code includes this in builds without CUDA, where the
// constructor throws.
#pragma once

#include "core/stream.h"

struct CUevent_st;

namespace ft::cuda {

class SideStream {
 public:
  explicit SideStream(int device);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  Stream stream() const { return stream_; }
  // The side stream waits for everything queued on the device's stream so far.
  void fork();
  // The device's stream waits for everything queued on the side stream so far. A capture that
  // forked must join before it ends.
  void join();

 private:
  int device_;
  Stream stream_ = nullptr;
  CUevent_st* forked_ = nullptr;
  CUevent_st* joined_ = nullptr;
};

}  // namespace ft::cuda
