// The generator that hands out Philox states. Each stochastic op asks for the state it starts
// from and says how many counter offsets it consumes; nothing else is hidden in it, so saving
// {seed, offset} in a checkpoint is saving the whole random state.
//
// Lanes (data parallelism): set_lane(r) shifts every handed-out offset by r * 2^48, so ranks that
// share a seed and a logical offset still draw different masks. state()/set_state() stay logical
// (lane-free): every rank checkpoints the same state. A run stays below 2^48 offsets per lane
// (a GPT-2-small micro-step consumes B * H per attention layer and 1 per dropout: a few thousand),
// so lanes never overlap.
//
// Capture mode (CUDA graphs, train/graph_step.h): a captured kernel keeps the offset it was given
// forever, so while capturing, next() hands out offsets relative to the offset at begin_capture()
// plus `offset_base`, a device word the replayer rewrites with the logical offset before every
// replay (kernels add *offset_base at their start: core/dropout_mask.h). end_capture() rewinds the
// generator (a capture runs nothing) and returns what one captured pass consumes; the replayer
// then advance()s by that much per replay, so state() is exact between replays.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/philox.h"

namespace ft {

class Generator {
 public:
  static constexpr int kLaneShift = 48;

  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : state_{seed, offset} {}

  // The state an op starts from; advances the offset past what the op consumes.
  PhiloxState next(uint64_t consumed) {
    PhiloxState s{state_.seed, state_.offset, nullptr};
    if (capture_base_ != nullptr) {
      s.offset -= capture_start_;
      s.offset_base = capture_base_;
    }
    s.offset += lane_ << kLaneShift;
    state_.offset += consumed;
    return s;
  }
  // The logical state: no lane shift, no offset_base.
  PhiloxState state() const { return PhiloxState{state_.seed, state_.offset, nullptr}; }
  void set_state(PhiloxState s) {
    FT_CHECK_ARG(capture_base_ == nullptr, "[generator] set_state during a graph capture");
    state_ = PhiloxState{s.seed, s.offset, nullptr};
  }
  // Skips `consumed` offsets: what a replayed graph drew.
  void advance(uint64_t consumed) { state_.offset += consumed; }

  void set_lane(uint64_t lane) {
    FT_CHECK_ARG(lane < (uint64_t{1} << (64 - kLaneShift)), "[generator] lane ", lane, " does not fit in ",
                 64 - kLaneShift, " bits");
    lane_ = lane;
  }
  uint64_t lane() const { return lane_; }

  // offset_base: a device uint64 that will hold the logical offset at each replay (non-null).
  void begin_capture(const uint64_t* offset_base) {
    FT_CHECK_ARG(offset_base != nullptr, "[generator] begin_capture needs a device offset word");
    FT_CHECK_ARG(capture_base_ == nullptr, "[generator] a capture is already in progress");
    capture_base_ = offset_base;
    capture_start_ = state_.offset;
  }
  // Ends capture mode, rewinds to the offset at begin_capture and returns what the captured
  // pass consumed (0 when no capture is in progress).
  uint64_t end_capture() {
    if (capture_base_ == nullptr) return 0;
    const uint64_t consumed = state_.offset - capture_start_;
    state_.offset = capture_start_;
    capture_base_ = nullptr;
    return consumed;
  }
  bool capturing() const { return capture_base_ != nullptr; }

 private:
  PhiloxState state_;
  uint64_t lane_ = 0;
  const uint64_t* capture_base_ = nullptr;  // non-null while capturing
  uint64_t capture_start_ = 0;
};

}  // namespace ft
