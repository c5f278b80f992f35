#include "core/dtype.h"

#include <ostream>

namespace tapeflow {

std::string_view dtype_name(DType d) {
  switch (d.id) {
    case DTypeId::Float16: return "float16";
    case DTypeId::BFloat16: return "bfloat16";
    case DTypeId::Float32: return "float32";
    case DTypeId::Float64: return "float64";
    case DTypeId::Int32: return "int32";
    case DTypeId::Int64: return "int64";
    case DTypeId::UInt8: return "uint8";
    case DTypeId::Bool: return "bool";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, DType d) { return os << dtype_name(d); }

}  // namespace tapeflow
