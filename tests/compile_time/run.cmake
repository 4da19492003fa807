# Compiles one file with the project's flags and fails when it takes longer than LIMIT_MS.
execute_process(COMMAND date +%s%3N OUTPUT_VARIABLE t0 OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${CXX} -std=c++20 -O3 -march=native -Wall -Wextra -Wpedantic -I${INCLUDE} -c ${SRC} -o ${OUT}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
execute_process(COMMAND date +%s%3N OUTPUT_VARIABLE t1 OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compile failed:\n${out}")
endif()
math(EXPR ms "${t1} - ${t0}")
message(STATUS "compiled ${SRC} in ${ms} ms (limit ${LIMIT_MS} ms)")
if(ms GREATER LIMIT_MS)
  message(FATAL_ERROR "took ${ms} ms, over the limit of ${LIMIT_MS} ms")
endif()
