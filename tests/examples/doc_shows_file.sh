#!/usr/bin/env bash
# A doc that shows an example program whole shows it as it is (docs/laws.md quotes
# examples/fit_law.cpp, which a ctest builds and runs), so the doc's code is the code that compiles.
#   doc_shows_file.sh DOC FILE
set -euo pipefail
python3 - "$1" "$2" <<'PY'
import sys
doc, text = (open(p).read() for p in sys.argv[1:3])
if text not in doc:
    sys.exit(f"{sys.argv[1]} does not show {sys.argv[2]} as it is: copy the file into its code block")
print(f"{sys.argv[1]} shows {sys.argv[2]} ({text.count(chr(10))} lines)")
PY
