// A block of memory owned by one allocator. Tensors share storages; views share one storage.
#pragma once

#include <cstddef>
#include <memory>

#include "core/allocator.h"
#include "core/device.h"

namespace ft {

class Storage {
 public:
  Storage(size_t nbytes, Device device, Allocator& alloc)
      : data_(alloc.allocate(nbytes)), nbytes_(nbytes), device_(device), alloc_(&alloc) {}
  ~Storage() { alloc_->deallocate(data_, nbytes_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool is_pinned() const { return alloc_ == &pinned_allocator(); }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  Allocator* alloc_;
};

}  // namespace ft
