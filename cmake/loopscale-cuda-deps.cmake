# Finds what loopscale::cuda (the CUDA backend, for code nvcc compiles) links, after
# loopscale-deps.cmake: the CUDA toolkit's runtime, cuBLAS and cuBLASLt (CUDA::cudart, CUDA::cublas,
# CUDA::cublasLt), and the target that gives Thrust its CUDA device system. Used by the build tree
# and by the installed package config, so both resolve the same way.
#
# loopscale_thrust_cuda is made by CCCL's thrust_create_target (the Thrust loopscale-deps.cmake
# found: the CUDA toolkit's CCCL where there is one), as loopscale_thrust_omp is there. It is an
# IMPORTED target, which install(EXPORT) cannot export; loopscale::cuda's export names it, and this
# file makes it again on the consumer's side.
include(CMakeFindDependencyMacro)

find_dependency(CUDAToolkit)

if(NOT TARGET loopscale_thrust_cuda)
  # Host code: the CPP system; device code: CUDA.
  thrust_create_target(loopscale_thrust_cuda HOST CPP DEVICE CUDA)
endif()
