# Sourced by the bench/gpu_*.sh scripts: `gpu_library_path BIN_DIR` prints the library search path
# for programs collected into BIN_DIR (bench/gpu_check.sh --collect): BIN_DIR itself (the shared
# libraries copied beside them) and the folders holding the image's cuBLASLt (the CUDA toolkit's,
# or a Python wheel's as on the lent H200 machines). The scripts give it to their own programs only
# (LD_LIBRARY_PATH=... program), so python3, tar and ncu keep the image's libraries.
gpu_library_path() {
  local path=$1 d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $(find /usr/local /opt /usr/lib -name 'libcublasLt.so.1*' 2>/dev/null | xargs -r -n1 dirname | sort -u | head -3); do
    [ -d "$d" ] && path="$path:$d"
  done
  [ -n "${LD_LIBRARY_PATH:-}" ] && path="$path:$LD_LIBRARY_PATH"
  echo "$path"
}
