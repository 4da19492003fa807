# Finds loopscale's dependencies and makes the target that gives Thrust its OpenMP device system.
# Used by the build tree and by the installed package config, so both resolve the same way.
include(CMakeFindDependencyMacro)

find_dependency(Eigen3 3.4 NO_MODULE)
find_dependency(Boost 1.71)          # header-only: Hana
find_dependency(OpenMP)
find_dependency(nlohmann_json 3.10)
find_dependency(fmt 8)

# Thrust: from the CUDA toolkit's CCCL where there is one, else Debian's libthrust-dev.
if(NOT TARGET loopscale_thrust_omp)
  set(LOOPSCALE_CCCL_DIR /usr/local/cuda/lib/cmake/cccl CACHE PATH "Where the CUDA toolkit's CCCL package config is")
  set(CCCL_ENABLE_DEFAULT_THRUST_TARGET OFF CACHE BOOL "" FORCE)
  find_package(CCCL CONFIG QUIET COMPONENTS Thrust PATHS ${LOOPSCALE_CCCL_DIR} NO_DEFAULT_PATH)
  if(NOT COMMAND thrust_create_target)
    find_package(Thrust CONFIG QUIET PATHS /usr/lib/cmake/thrust /usr/share/cmake/thrust)
  endif()
  if(NOT COMMAND thrust_create_target)
    message(FATAL_ERROR "loopscale: no Thrust found; install the CUDA toolkit or Debian's libthrust-dev (scripts/setup.sh)")
  endif()
  # Host code: the OMP device system, compiled by the host compiler.
  thrust_create_target(loopscale_thrust_omp HOST CPP DEVICE OMP)
endif()

# The data layer (include/loopscale/data/): SentencePiece for the subword tokenizers (its encoder
# and its trainer, two libraries) and xxHash's header for the checksums (compiled inline, nothing
# to link). Debian's libsentencepiece-dev and libxxhash-dev (scripts/setup.sh). The same imported
# target carries LBFGSpp's include folder (below) for the law fits.
if(NOT TARGET loopscale_data_deps)
  find_path(LOOPSCALE_SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
  find_library(LOOPSCALE_SENTENCEPIECE_LIBRARY sentencepiece)
  find_library(LOOPSCALE_SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train)
  find_path(LOOPSCALE_XXHASH_INCLUDE_DIR xxhash.h)
  if(NOT LOOPSCALE_SENTENCEPIECE_INCLUDE_DIR OR NOT LOOPSCALE_SENTENCEPIECE_LIBRARY OR NOT LOOPSCALE_SENTENCEPIECE_TRAIN_LIBRARY)
    message(FATAL_ERROR "loopscale: SentencePiece not found; install Debian's libsentencepiece-dev (scripts/setup.sh)")
  endif()
  if(NOT LOOPSCALE_XXHASH_INCLUDE_DIR)
    message(FATAL_ERROR "loopscale: xxhash.h not found; install Debian's libxxhash-dev (scripts/setup.sh)")
  endif()
  # LBFGSpp (header-only) for the law fits (include/loopscale/law/): checked here so that a
  # missing package is a configure error naming it, not a compile error in a law header.
  find_path(LOOPSCALE_LBFGSPP_INCLUDE_DIR LBFGSB.h)
  if(NOT LOOPSCALE_LBFGSPP_INCLUDE_DIR)
    message(FATAL_ERROR "loopscale: LBFGSB.h (LBFGSpp) not found; install Debian's liblbfgspp-dev (scripts/setup.sh)")
  endif()
  add_library(loopscale_data_deps INTERFACE IMPORTED)
  target_include_directories(loopscale_data_deps INTERFACE ${LOOPSCALE_SENTENCEPIECE_INCLUDE_DIR} ${LOOPSCALE_XXHASH_INCLUDE_DIR}
                                                        ${LOOPSCALE_LBFGSPP_INCLUDE_DIR})
  target_link_libraries(loopscale_data_deps INTERFACE ${LOOPSCALE_SENTENCEPIECE_TRAIN_LIBRARY} ${LOOPSCALE_SENTENCEPIECE_LIBRARY})
endif()
