#include "distribute/replica_context.h"

#include <utility>

namespace tapeflow::distribute {

namespace {
thread_local ReplicaContext* t_context = nullptr;
}

ReplicaContext* get_replica_context() { return t_context; }

namespace detail {
ReplicaContextScope::ReplicaContextScope(ReplicaContext* context)
    : saved_(std::exchange(t_context, context)) {}
ReplicaContextScope::~ReplicaContextScope() { t_context = saved_; }
}  // namespace detail

}  // namespace tapeflow::distribute
