# Installs the build tree into a fresh prefix, then configures, builds and runs a separate project
# that finds loopscale with find_package(loopscale CONFIG REQUIRED).
#
# Where the build has CUDA (HAS_CUDA, with its nvcc CUDA_COMPILER and CUDA_ARCHITECTURES,
# '|'-separated), the consumer also builds consumer_cuda, a .cu file linking loopscale::cuda that
# trains a step of Transformer<float, CudaBackend>; it passes with "consumer cuda ok" on a GPU and
# with exit 77 and "no device" without one. Then two configure-only checks of the same install with
# the CUDA toolkit hidden (CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit): the package is still found,
# without loopscale::cuda, and COMPONENTS cuda fails with a message. Without CUDA the consumer is
# the plain one only.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed")
endif()
if(NOT EXISTS ${WORK_DIR}/prefix/bin/loopscale)
  message(FATAL_ERROR "the loopscale program was not installed")
endif()

set(cuda_args -DCONSUMER_CUDA=OFF)
if(HAS_CUDA)
  string(REPLACE "|" ";" archs "${CUDA_ARCHITECTURES}")
  set(cuda_args -DCONSUMER_CUDA=ON -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER} "-DCMAKE_CUDA_ARCHITECTURES=${archs}")
  file(GLOB_RECURSE cuda_targets ${WORK_DIR}/prefix/loopscale-cuda-targets.cmake)
  if(NOT cuda_targets)
    message(FATAL_ERROR "the build has CUDA but loopscale::cuda was not installed (no loopscale-cuda-targets.cmake)")
  endif()
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK_DIR}/build -DCMAKE_CXX_COMPILER=${CXX}
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release ${cuda_args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer failed:\n${out}")
endif()
# Runs one of the consumer's programs: it must exit 0 and print `expect`.
function(run_consumer program expect)
  execute_process(COMMAND ${WORK_DIR}/build/${program} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${expect}")
    message(FATAL_ERROR "${program} failed:\n${out}")
  endif()
  message(STATUS "${out}")
endfunction()
run_consumer(consumer "consumer ok")
run_consumer(consumer_native " ok: ")
run_consumer(consumer_baseline " ok: ")

# The two-file program with loopscale::law_instances and loopscale::train_instances, a unity build:
# it builds (the instances files stayed translation units of their own, or they stop with #error),
# runs, and its own files, joined in one object, call the fitter and the engine's backward pass
# without defining them (U in nm, not T or W): the instantiations are compiled once, in the
# instances files the targets add.
run_consumer(consumer_instances "consumer instances ok")
file(GLOB_RECURSE object ${WORK_DIR}/build/CMakeFiles/consumer_instances.dir/Unity/*.o)
list(LENGTH object n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "consumer_instances: expected one unity object of its own files, found: ${object}")
endif()
execute_process(COMMAND nm -C ${object} RESULT_VARIABLE rc OUTPUT_VARIABLE symbols ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm ${object} failed: ${err}")
endif()
foreach(symbol "loopscale::law::fit<loopscale::law::AnyLaw>"
               "loopscale::train::Transformer<float, loopscale::train::HostBackend>::backward_from_logits")
  string(REGEX MATCH " U [^\n]*${symbol}" undefined "${symbols}")
  string(REGEX MATCH " [TWtw] [^\n]*${symbol}" defined "${symbols}")
  if(NOT undefined OR defined)
    message(FATAL_ERROR "consumer_instances' own files should call ${symbol} and not define it (extern template), but nm says:\n${symbols}")
  endif()
endforeach()

if(HAS_CUDA)
  execute_process(COMMAND ${WORK_DIR}/build/consumer_cuda RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT ((rc EQUAL 0 AND out MATCHES "consumer cuda ok") OR (rc EQUAL 77 AND out MATCHES "no device")))
    message(FATAL_ERROR "the CUDA consumer failed (exit ${rc}):\n${out}")
  endif()
  message(STATUS "${out}")

  # The same install where the consumer has no CUDA toolkit: found, without loopscale::cuda.
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK_DIR}/build_no_cuda -DCMAKE_CXX_COMPILER=${CXX}
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release -DCONSUMER_CUDA=OFF
                          -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCONSUMER_EXPECT_NO_CUDA_TARGET=ON
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring the consumer without the CUDA toolkit failed:\n${out}")
  endif()
  # ... and one that requires loopscale::cuda there fails, saying why.
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK_DIR}/build_no_cuda_required -DCMAKE_CXX_COMPILER=${CXX}
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release -DCONSUMER_CUDA=OFF
                          -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCONSUMER_REQUIRE_CUDA_COMPONENT=ON
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "CUDAToolkit")
    message(FATAL_ERROR "find_package(loopscale COMPONENTS cuda) without the CUDA toolkit did not fail as it should (exit ${rc}):\n${out}")
  endif()
  message(STATUS "without the CUDA toolkit: the package is found without loopscale::cuda; COMPONENTS cuda fails")
endif()
