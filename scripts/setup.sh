#!/usr/bin/env bash
# Installs every build, test and demo dependency of loopscale from Debian packages.
# Idempotent: packages already present are left alone; safe to run before every build.
set -euo pipefail

pkgs=(
  cmake g++ make pkg-config
  libeigen3-dev          # dense linear algebra: law fitting, double GEMMs, the training engine's GEMMs without oneDNN
  libdnnl-dev            # oneDNN: the training engine's GEMMs (HostBackend::gemm; CMake LOOPSCALE_GEMM=auto, the default)
  libboost-dev           # Boost.Hana: compile-time type lists of the architecture algebra
  libboost-context-dev   # Boost.Context: the fibers of the SIMT emulator that runs the CUDA kernels on the CPU in the tests (tests/simt/)
  catch2                 # unit tests (Catch2 v2)
  libbenchmark-dev       # Google Benchmark programs under bench/
  nlohmann-json3-dev     # JSON in/out of the command line and sweep results
  libfmt-dev             # formatting of tables and messages
  libcli11-dev           # the `loopscale` command line
  liblbfgspp-dev         # L-BFGS-B for the scaling-law fits
  libsentencepiece-dev   # SentencePiece: training and running the subword tokenizers of `loopscale data` (data/)
  libxxhash-dev          # xxHash (XXH3-64, header-only): the checksum of every checkpoint, token file, corpus shard and tokenizer
  python3-scipy          # bench/law: the SciPy side of the law-fitting benchmark
  gnuplot-nox            # plots of sweep reports
  clang libclang-rt-14-dev  # libFuzzer (-fsanitize=fuzzer) for the fuzz stage, scripts/fuzz.sh; GCC has no libFuzzer
  bible-kjv bible-kjv-text fortunes fortunes-min python3.11-doc perl-doc  # text corpus sources (scripts/corpus.sh)
  openmpi-bin libopenmpi-dev  # Open MPI: mpirun and MPI for data-parallel `loopscale train` (docs/scaling-out.md)
  jq                     # the MPI test (tests/train/mpi_train.sh) reads log.jsonl and summary.json
)
# Installed after everything above, Open MPI included: slurmd loads libpmix (Open MPI's PMIx) when it
# starts, so a slurmd started before Open MPI was there cannot launch MPI steps. The live Slurm test
# (scripts/slurm-cluster.sh, tests/sweep/slurm_live.sh) runs its own one-node cluster with them.
late=(slurm-wlm munge)
# `setup.sh --bench`: also OpenBLAS, which only bench_gemm_libraries and the LOOPSCALE_GEMM=openblas
# build use (docs/benchmarks.md, "GEMM libraries"); oneDNN, the host GEMM, is in the list above.
if [ "${1:-}" = --bench ]; then
  pkgs+=(libopenblas-pthread-dev)
fi
# Debian's Thrust is only needed where the CUDA toolkit (which carries CCCL) is absent.
if [ ! -d /usr/local/cuda/include/cccl/thrust ] && [ ! -d /usr/local/cuda/include/thrust ]; then
  pkgs+=(libthrust-dev)
fi

missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${pkgs[@]}")
mapfile -t missing_late < <(missing_of "${late[@]}")
if [ ${#missing[@]} -gt 0 ] || [ ${#missing_late[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  [ ${#missing[@]} -eq 0 ] || $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  [ ${#missing_late[@]} -eq 0 ] || $SUDO apt-get install -y -qq --no-install-recommends "${missing_late[@]}"
fi
echo "setup: all dependencies present"
