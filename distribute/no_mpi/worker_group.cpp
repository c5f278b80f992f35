// Built without MPI: MultiWorkerMirroredStrategy reports that it is unavailable.
#include "core/check.h"
#include "distribute/worker_group.h"

namespace tapeflow::distribute::detail {

bool mpi_built() { return false; }

std::shared_ptr<WorkerGroup> world_worker_group(double) {
  TF_THROW(UnimplementedError, "MultiWorkerMirroredStrategy",
           "tapeflow was built without MPI: install Debian's libopenmpi-dev (tools/setup.sh "
           "does) and configure again (TAPEFLOW_MPI=AUTO or ON)");
}

}  // namespace tapeflow::distribute::detail
