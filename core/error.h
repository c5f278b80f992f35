// The exception classes, named as TF's. Every message names the op and the offending shapes or
// dtypes, e.g. "[matmul] inner dimensions differ: a is (2, 3), b is (4, 5)".
#pragma once

#include <stdexcept>
#include <string>

namespace tapeflow {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Bad shapes, dtypes, axes or values given by the caller.
class InvalidArgumentError : public Error {
 public:
  using Error::Error;
};
class NotFoundError : public Error {
 public:
  using Error::Error;
};
// Out of (device) memory; the message gives the requested and available bytes.
class ResourceExhaustedError : public Error {
 public:
  using Error::Error;
};
// The system is not in a state that allows the call (e.g. a non-persistent tape used twice).
class FailedPreconditionError : public Error {
 public:
  using Error::Error;
};
class UnimplementedError : public Error {
 public:
  using Error::Error;
};
// A collective did not complete in time (a worker of a MultiWorkerMirroredStrategy is stuck or
// gone; the message names it and the timeout).
class DeadlineExceededError : public Error {
 public:
  using Error::Error;
};
// Another process cannot be reached (a worker died, or the communication layer failed).
class UnavailableError : public Error {
 public:
  using Error::Error;
};
// A broken internal invariant or a failed library call: a bug or an environment problem.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace tapeflow
