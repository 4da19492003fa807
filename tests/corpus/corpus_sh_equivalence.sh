#!/usr/bin/env bash
# scripts/corpus.sh builds the corpus with `loopscale data prepare --tokenizer byte`; the script
# it replaced (corpus_v1.sh, the Python writer of the LSTOKENS files, kept verbatim) must give the
# same files byte for byte: same documents, same split, same tokens, same headers.
# Usage: corpus_sh_equivalence.sh SOURCE_DIR LOOPSCALE WORK_DIR
set -euo pipefail
src="$1"; bin="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
bash "$src/tests/corpus/corpus_v1.sh" "$work/old" > "$work/old.log"
LOOPSCALE="$bin" bash "$src/scripts/corpus.sh" "$work/new" > "$work/new.log"
for f in train.bin val.bin; do
  if ! cmp "$work/old/$f" "$work/new/$f"; then
    echo "FAIL: $f differs between the old and the new corpus.sh"; exit 1
  fi
done
# The new corpus is a valid manifest corpus, and the meta.json numbers are the old ones.
"$bin" data verify "$work/new"
python3 - "$work/old/meta.json" "$work/new/meta.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k, v in a.items():
    if b.get(k) != v:
        sys.exit(f"FAIL: meta.json {k}: old {v}, new {b.get(k)}")
PY
cat "$work/new.log"
echo "PASS: train.bin and val.bin are identical ($(stat -c %s "$work/new/train.bin") and $(stat -c %s "$work/new/val.bin") bytes)"
rm -rf "$work"
