# cmake -P script: runs PROGRAM with the ;-separated ARGS and requires exit code EXPECT_RC and
# standard output plus standard error matching the regular expression EXPECT_REGEX.
execute_process(COMMAND ${PROGRAM} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "${PROGRAM} ${ARGS} exited with ${rc}, expected ${EXPECT_RC}:\n${out}\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: output does not match '${EXPECT_REGEX}':\n${out}\n${err}")
endif()
