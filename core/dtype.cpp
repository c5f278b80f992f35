#include "core/dtype.h"

#include <ostream>

#include "core/check.h"

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

void check_dtype_id(const char* op, DType d) {
  TF_CHECK_ARG(dtype_size(d) != 0, op,
               "dtype id {} is not one of tapeflow's dtypes (float16, bfloat16, float32, "
               "float64, int32, int64, uint8, bool)",
               static_cast<int>(d.id));
}

}  // namespace tapeflow
