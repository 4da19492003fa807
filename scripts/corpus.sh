#!/usr/bin/env bash
# Builds the English text corpus the training engine's tests and examples train on, from Debian
# packages that scripts/setup.sh installs: the King James Bible (through the `bible` program),
# fortune cookies, the Python 3.11 documentation sources (.rst.txt) and the Perl documentation
# (.pod). The text is cleaned (markup stripped, whitespace normalised), split into documents
# (a Bible book, a fortune, a documentation file), and the documents are divided into training and
# validation sets by a hash of their names, so no document is in both.
#
# The documents are written as JSON Lines (docs/train.jsonl, docs/val.jsonl in the corpus folder)
# and encoded by `loopscale data prepare --tokenizer byte --shard-tokens 0` into byte-level
# LSTOKENS files (vocab 256; docs/data.md): train.bin, val.bin and manifest.json, in data/corpus/
# (or the folder given as the first argument); meta.json adds the sources and the unigram entropy
# of the training bytes (printed, in bits per byte). The tokens are those the script wrote before
# `data prepare` existed (tests/corpus/corpus_sh_equivalence.sh compares). Idempotent: an existing,
# valid corpus is kept as it is.
#
# Needs the `loopscale` program: $LOOPSCALE, else build/loopscale (built here when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-data/corpus}"
mkdir -p "$out"
bin="${LOOPSCALE:-build/loopscale}"
if [ ! -x "$bin" ]; then
  echo "corpus: building $bin (needed by data prepare)"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build build -j "$(nproc)" --target loopscale_cli > /dev/null
  bin=build/loopscale
fi
exec /usr/bin/python3 - "$out" "$bin" <<'PY'
import hashlib, json, math, os, re, struct, subprocess, sys, glob

out, loopscale = sys.argv[1], sys.argv[2]
MAGIC, VERSION, HEADER = b"LSTOKENS", 1, 40
MIN_TOTAL, MIN_VAL = 20_000_000, 1_000_000
VAL_TARGET = 1_250_000

def header(n):
    return MAGIC + struct.pack("<IIIIQQ", VERSION, 1, 256, 0, n, n)

def valid(path, n):
    # Version 1 (40-byte header) or 2 (48 bytes: a header check and the tokens' checksum, which
    # `data prepare` writes and training verifies; docs/data.md).
    try:
        with open(path, "rb") as f:
            h = f.read(48)
        if h[:40] == header(n):
            return os.path.getsize(path) == HEADER + n
        v2 = MAGIC + struct.pack("<III", 2, 1, 256)
        return h[:20] == v2 and h[24:40] == struct.pack("<QQ", n, n) and os.path.getsize(path) == 48 + n
    except OSError:
        return False

meta_path = os.path.join(out, "meta.json")
if os.path.exists(meta_path):
    try:
        meta = json.load(open(meta_path))
        if (valid(os.path.join(out, "train.bin"), meta["train_tokens"]) and
                valid(os.path.join(out, "val.bin"), meta["val_tokens"]) and
                os.path.exists(os.path.join(out, "manifest.json"))):
            print(f"corpus: {out} is up to date ({meta['train_tokens']} train, {meta['val_tokens']} validation bytes)")
            print(f"corpus: unigram entropy {meta['unigram_entropy_bits_per_byte']:.4f} bits per byte")
            sys.exit(0)
    except (ValueError, KeyError, OSError):
        pass

def squeeze(text):
    # Tabs to spaces, no trailing blanks, at most one empty line in a row.
    lines = [l.replace("\t", "    ").rstrip() for l in text.splitlines()]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"

docs = []  # (name, text)

# King James Bible: one document per book.
bible = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
books = {}
order = []
for line in bible.splitlines():
    m = re.match(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.*)$", line)
    if m:
        book = m.group(1)
        if book not in books:
            books[book] = []
            order.append(book)
        books[book].append(m.group(4))
    elif line.strip() and order:
        books[order[-1]][-1] += " " + line.strip()
if len(order) < 60:
    sys.exit(f"corpus: the bible program gave {len(order)} books, expected 66")
for b in order:
    docs.append(("bible/" + b, squeeze("\n".join(books[b]))))

# Fortunes: every cookie is a document; the picture collections are not prose.
fdir = "/usr/share/games/fortunes"
for path in sorted(glob.glob(fdir + "/*")):
    name = os.path.basename(path)
    if name.endswith((".dat", ".u8")) or os.path.islink(path) or name in ("art", "ascii-art"):
        continue
    text = open(path, encoding="utf-8", errors="replace").read()
    for i, cookie in enumerate(re.split(r"\n%\n", text)):
        if cookie.strip():
            docs.append((f"fortunes/{name}/{i}", squeeze(cookie)))

# Python documentation sources: drop directive lines and role markup, keep the prose and examples.
role = re.compile(r":[a-z:]+:`~?([^`<]*?)(?: <[^>]*>)?`")
for path in sorted(glob.glob("/usr/share/doc/python3.11/html/_sources/**/*.rst.txt", recursive=True)):
    text = open(path, encoding="utf-8", errors="replace").read()
    text = role.sub(r"\1", text)
    text = re.sub(r"^\s*\.\. [a-z-]+::.*$", "", text, flags=re.M)
    text = re.sub(r"^\s*:[a-z-]+:.*$", "", text, flags=re.M)
    text = re.sub(r"^([=\-~^*#\"'+`])\1{3,}$", "", text, flags=re.M)
    text = text.replace("``", "")
    docs.append(("python/" + os.path.relpath(path, "/usr/share/doc/python3.11/html/_sources"), squeeze(text)))

# Perl documentation: POD commands become plain headings, formatting codes their text.
code = re.compile(r"[BCIFLSEXZ]<+\s*([^<>]*?)\s*>+")
for path in sorted({os.path.realpath(p) for p in glob.glob("/usr/share/perl/*/pod/*.pod")}):
    text = open(path, encoding="utf-8", errors="replace").read()
    text = re.sub(r"^=(?:over|back|cut|pod|encoding|begin|end|for)\b.*$", "", text, flags=re.M)
    text = re.sub(r"^=(?:head\d|item)\s*", "", text, flags=re.M)
    for _ in range(3):
        text = code.sub(r"\1", text)
    docs.append(("perl/" + os.path.basename(path), squeeze(text)))

# Identical documents (repeated fortunes, files reached twice) are kept once.
seen, unique = set(), []
for name, text in docs:
    h = hashlib.sha256(text.encode()).digest()
    if h not in seen:
        seen.add(h)
        unique.append((name, text))
docs = unique

# Validation: documents in the order of a hash of their names until VAL_TARGET bytes.
docs.sort(key=lambda d: d[0])
by_hash = sorted(range(len(docs)), key=lambda i: hashlib.sha256(docs[i][0].encode()).hexdigest())
val_ids, size = set(), 0
for i in by_hash:
    if size >= VAL_TARGET:
        break
    val_ids.add(i)
    size += len(docs[i][1].encode())
train = "\n".join(d[1] for i, d in enumerate(docs) if i not in val_ids).encode("utf-8")
val = "\n".join(d[1] for i, d in enumerate(docs) if i in val_ids).encode("utf-8")
if len(train) + len(val) < MIN_TOTAL or len(val) < MIN_VAL:
    sys.exit(f"corpus: only {len(train)} train and {len(val)} validation bytes "
             f"(need {MIN_TOTAL} in all and {MIN_VAL} for validation); are the packages of scripts/setup.sh installed?")

counts = [0] * 256
for b in train:
    counts[b] += 1
H = -sum(c / len(train) * math.log2(c / len(train)) for c in counts if c)

# The documents as JSON Lines, in the order the splits are written: each split is its documents
# joined by one newline, which is how `data prepare` separates documents.
os.makedirs(os.path.join(out, "docs"), exist_ok=True)
for split, ids in (("train", [i for i in range(len(docs)) if i not in val_ids]), ("val", sorted(val_ids))):
    tmp = os.path.join(out, "docs", split + ".jsonl.tmp")
    with open(tmp, "w") as f:
        for i in ids:
            f.write(json.dumps({"name": docs[i][0], "text": docs[i][1]}) + "\n")
    os.replace(tmp, os.path.join(out, "docs", split + ".jsonl"))
if os.path.exists(meta_path):
    os.remove(meta_path)
subprocess.run([loopscale, "data", "prepare", "--quiet", "--force", "--tokenizer", "byte", "--shard-tokens", "0",
                "--input", os.path.join(out, "docs", "train.jsonl"), "--val-input", os.path.join(out, "docs", "val.jsonl"),
                "--text-field", "text", "--out", out], check=True, stdout=subprocess.DEVNULL)
if not (valid(os.path.join(out, "train.bin"), len(train)) and valid(os.path.join(out, "val.bin"), len(val))):
    sys.exit("corpus: data prepare did not write the expected train.bin and val.bin")

meta = {"train_tokens": len(train), "val_tokens": len(val), "documents": len(docs), "val_documents": len(val_ids),
        "vocab": 256, "unigram_entropy_bits_per_byte": H,
        "sources": ["bible-kjv", "fortunes", "fortunes-min", "python3.11-doc", "perl-doc"]}
tmp = meta_path + ".tmp"
json.dump(meta, open(tmp, "w"), indent=2)
os.replace(tmp, meta_path)
print(f"corpus: wrote {out}: {len(docs)} documents, {len(train)} train and {len(val)} validation bytes")
print(f"corpus: unigram entropy {H:.4f} bits per byte")
PY
