# Runs the hidden [.failure_KIND] case of the multi-worker test binary under mpirun and checks
# that the job ends, in bounded time, with the error a user should see:
#   stuck: worker 1 sleeps past the 2 s collective timeout; worker 0 raises
#          DeadlineExceededError naming worker 1 and the timeout, and the job ends (MPI_Abort).
#   absent: worker 1 creates its second strategy 5 s late; worker 0's constructor raises
#          DeadlineExceededError after the 2 s timeout, and the job ends (MPI_Abort).
#   dies:  worker 1 is killed (SIGKILL) at step 3; the job ends (mpirun ends the others, or
#          worker 0 raises first).
#   raises: worker 1's step throws at step 2; worker 0 raises UnavailableError with worker 1's
#          message at once (not after the 60 s timeout), and the job ends (MPI_Abort).
#   ring:  3 workers, worker 1 stuck; worker 0 times out waiting for worker 2 (its neighbour on
#          the ring, itself waiting for worker 1) and says that worker 1 may be the one.
# cmake -DMPIRUN=<mpirun;args> -DPROGRAM=<binary> -DKIND=stuck|absent|dies|raises|ring
#   -P run_failure.cmake
string(TIMESTAMP start "%s")
execute_process(COMMAND ${MPIRUN} ${PROGRAM} "[.failure_${KIND}]"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
string(TIMESTAMP end "%s")
math(EXPR elapsed "${end} - ${start}")
set(all "${out}${err}")
message("${all}")
message("exit status: ${rc}, ${elapsed} s")
if(rc MATCHES "timeout|Process terminated")
  message(FATAL_ERROR "the job did not end within 120 s: a worker hangs")
endif()
if(elapsed GREATER 60)
  message(FATAL_ERROR "the job took ${elapsed} s to end")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job ended with status 0 although a worker failed")
endif()
if(KIND STREQUAL "stuck")
  set(want "worker 0 raised DeadlineExceededError after [0-9.]+ s: \\[all_reduce\\] worker 0 of 2: worker 1 did not answer within 2 s")
elseif(KIND STREQUAL "absent")
  set(want "worker 0 raised DeadlineExceededError after [0-9.]+ s: \\[MultiWorkerMirroredStrategy\\] worker 0 of 2: the other workers did not create their strategy within 2 s")
elseif(KIND STREQUAL "ring")
  set(want "worker 0 raised DeadlineExceededError after [0-9.]+ s: \\[all_reduce\\] worker 0 of 3: worker 2, the one before this worker on the ring, did not answer within 2 s [^\n]*: worker 2 is gone or stuck, or it waits itself for a worker further back on the ring \\(worker 1\\)")
elseif(KIND STREQUAL "raises")
  set(want "worker 0 raised at step 2 after [0-9.]+ s: \\[all_reduce\\] worker 0 of 2: the step ended because worker 1 of 2 failed: boom in worker 1's step")
else()
  set(want "signal 9|Killed|worker 0 raised at step 3")
endif()
if(NOT all MATCHES "${want}")
  message(FATAL_ERROR "the output does not show the expected error (${want})")
endif()
