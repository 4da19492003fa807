#!/usr/bin/env bash
# scripts/corpus.sh builds the corpus with `loopscale data prepare --tokenizer byte`; the script
# it replaced (corpus_v1.sh, the Python writer of the LSTOKENS files, kept verbatim) must give the
# same tokens byte for byte and the same header fields: same documents, same split. The old script
# writes version 1 files (40-byte header), loopscale version 2 (48 bytes: a header check and the
# tokens' checksum added, data/token_file.hpp), so the tokens are compared after each header.
# Usage: corpus_sh_equivalence.sh SOURCE_DIR LOOPSCALE WORK_DIR
set -euo pipefail
src="$1"; bin="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
bash "$src/tests/corpus/corpus_v1.sh" "$work/old" > "$work/old.log"
LOOPSCALE="$bin" bash "$src/scripts/corpus.sh" "$work/new" > "$work/new.log"
for f in train.bin val.bin; do
  if ! cmp <(tail -c +41 "$work/old/$f") <(tail -c +49 "$work/new/$f"); then
    echo "FAIL: the tokens of $f differ between the old and the new corpus.sh"; exit 1
  fi
  python3 - "$work/old/$f" "$work/new/$f" <<'PY'
import struct, sys
old, new = (open(p, "rb").read(48) for p in sys.argv[1:3])
o = struct.unpack("<8sIIIIQQ", old[:40]); n = struct.unpack("<8sIIIIQQ", new[:40])
if (o[0], o[1], o[2], o[3], o[5], o[6]) != (n[0], 1, n[2], n[3], n[5], n[6]) or n[1] != 2:
    sys.exit(f"FAIL: header fields differ: old {o}, new {n}")
PY
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
echo "PASS: train.bin and val.bin hold the same tokens and header fields ($(stat -c %s "$work/new/train.bin") and $(stat -c %s "$work/new/val.bin") bytes)"
rm -rf "$work"
