// Builds without NCCL (FT_NCCL off): data parallelism on GPUs is unavailable, said when asked for.
#include "core/error.h"
#include "train/dist/nccl_communicator.h"

namespace ft {

std::unique_ptr<Communicator> make_nccl_communicator(Rendezvous&, int, int, Device, double) {
  throw Error("[dist] built without NCCL: multi-GPU training needs a build with -DFT_NCCL=ON");
}

}  // namespace ft
