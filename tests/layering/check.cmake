# The layering of include/loopscale/: a header may include headers of its own folder and of the
# folders below it, never above or beside:
#
#   util  <  spec  <  account, data  <  arch, train, law  <  eval  <  sweep  <  loopscale.hpp (the umbrella)
#
# arch (the compile-time algebra), train (the engine) and law (the fits) are independent of each
# other; data (token files, corpora, tokenizers) sits beside account and below train, which reads
# it. eval (tasks, scoring, generation) reads trained models and sits below sweep, which evaluates
# every run it trains. Any include that breaks the order is reported with its file and line; so no cycle between
# folders can form.
set(rank_util 0)
set(rank_spec 1)
set(rank_account 2)
set(rank_data 2)
set(rank_arch 3)
set(rank_train 3)
set(rank_law 3)
set(rank_eval 4)
set(rank_sweep 5)

get_filename_component(INCLUDE "${INCLUDE}" ABSOLUTE)
file(GLOB_RECURSE headers RELATIVE ${INCLUDE}/loopscale ${INCLUDE}/loopscale/*.hpp)
# A wrong INCLUDE (or a moved tree) globbed nothing and reported "layering holds: 0 headers".
if(NOT headers)
  message(FATAL_ERROR "no headers found under ${INCLUDE}/loopscale (INCLUDE must be the include/ folder)")
endif()
# An include as the preprocessor reads it: quotes or angle brackets, blanks before and after the
# '#'. Only `#include "loopscale/` at the start of a line was seen: an include in angle brackets, or
# one indented inside an #if, could break the layering unnoticed. The forms are tried first.
set(include_re "^[ \t]*#[ \t]*include[ \t]*[\"<]loopscale/")
foreach(form "#include \"loopscale/train/a.hpp\"" "  #  include <loopscale/train/a.hpp>" "\t#include<loopscale/train/a.hpp>")
  string(REGEX REPLACE "${include_re}([^/\">]+)/.*" "\\1" target "${form}")
  if(NOT form MATCHES "${include_re}" OR NOT target STREQUAL "train")
    message(FATAL_ERROR "the include pattern misreads '${form}' (read '${target}')")
  endif()
endforeach()
set(problems "")
set(edges 0)
foreach(h ${headers})
  string(REGEX MATCH "^[^/]+" folder "${h}")
  if(folder STREQUAL h)  # loopscale.hpp at the top may include anything
    continue()
  endif()
  if(NOT DEFINED rank_${folder})
    string(APPEND problems "${h}: folder '${folder}' has no place in the layering (add it to tests/layering/check.cmake)\n")
    continue()
  endif()
  file(STRINGS ${INCLUDE}/loopscale/${h} lines REGEX "${include_re}")
  foreach(line ${lines})
    string(REGEX REPLACE "${include_re}([^/\">]+)/.*" "\\1" target "${line}")
    if(target STREQUAL line)
      string(APPEND problems "${h}: includes the umbrella (${line}); include what it needs\n")
      continue()
    endif()
    math(EXPR edges "${edges} + 1")
    if(target STREQUAL folder)
      continue()
    endif()
    if(NOT DEFINED rank_${target})
      string(APPEND problems "${h}: includes ${target}/, which has no place in the layering\n")
    elseif(NOT rank_${target} LESS rank_${folder})
      string(APPEND problems "${h}: ${folder}/ may not include ${target}/ (${line})\n")
    endif()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "include layering broken:\n${problems}")
endif()
list(LENGTH headers n)
message(STATUS "layering holds: ${n} headers, ${edges} includes between them")
