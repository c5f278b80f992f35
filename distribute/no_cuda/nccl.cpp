// NCCL without the CUDA toolkit: the strategy never selects it; asking for it is an error.
#include "core/check.h"
#include "distribute/nccl.h"

namespace tapeflow::distribute::detail {

bool nccl_built() { return false; }

std::unique_ptr<NcclComms> make_nccl_comms(const std::vector<Device>&, WorkerGroup*) {
  TF_THROW(UnimplementedError, "NcclAllReduce",
           "tapeflow was built without CUDA, so NCCL is not available; use "
           "tf::distribute::ReductionToOneDevice (the in-process all-reduce)");
}

}  // namespace tapeflow::distribute::detail
