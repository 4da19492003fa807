// data prepare: documents in, shards and a manifest out; the split by whole documents; the same
// token stream and the same training windows whatever the shard size and the thread count.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "corpus/helpers.hpp"
#include "loopscale/data/prepare.hpp"
#include "loopscale/data/tokenizer_train.hpp"
#include "loopscale/data/verify.hpp"
#include "loopscale/train/data.hpp"

using namespace loopscale;
using namespace loopscale::data;
using namespace loopscale::test;

namespace {

constexpr int n_docs = 600;

// n_docs documents: the first half in a JSONL file (with other fields), the second half as text
// files, one document each.
fs::path write_inputs(const fs::path& dir) {
  fs::create_directories(dir / "in" / "text");
  std::ofstream f(dir / "in" / "a.jsonl");
  for (int i = 0; i < n_docs / 2; ++i) f << nlohmann::json{{"id", i}, {"text", document(i)}, {"url", "x"}}.dump() << "\n";
  f.close();
  for (int i = n_docs / 2; i < n_docs; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "%05d.txt", i);
    write_text(dir / "in" / "text" / name, document(i));
  }
  return dir / "in";
}

PrepareOptions options(const fs::path& in, const fs::path& out, const std::string& tokenizer, std::uint64_t shard_tokens) {
  PrepareOptions o;
  o.input.paths = {in.string()};
  o.tokenizer = tokenizer;
  o.out = out;
  o.split = {0.2, 11};
  o.shard_tokens = shard_tokens;
  o.threads = 2;
  return o;
}

// The documents of a split, read back: the decoded stream cut at the separators between them.
std::vector<std::string> documents_of(const fs::path& corpus, Split s, const Tokenizer& t) {
  const std::string text = t.decode(all_tokens(open_corpus(corpus, s)));
  std::vector<std::string> docs;
  std::size_t start = 0;
  while (start < text.size()) {
    // Every document starts with "<doc " and ends with "\n"; the separator is one more "\n".
    const std::size_t next = text.find("\n<doc ", start);
    if (next == std::string::npos) {
      docs.push_back(text.substr(start));
      break;
    }
    docs.push_back(text.substr(start, next - start));
    start = next + 1;
  }
  return docs;
}

std::string model_for(const fs::path& dir, const fs::path& in) {
  TokenizerTrainOptions o;
  o.input.paths = {in.string()};
  o.vocab = 450;
  o.split = {0.2, 11};  // the validation documents of the corpus stay unseen
  write_text(dir / "tok.model", train_tokenizer(o).model);
  return (dir / "tok.model").string();
}

}  // namespace

TEST_CASE("prepare: every document is in exactly one split, whole, in input order", "[corpus][prepare]") {
  const fs::path dir = temp_dir("split");
  const fs::path in = write_inputs(dir);
  for (const std::string& tok : {std::string("byte"), model_for(dir, in)}) {
    const fs::path out = dir / "c";
    PrepareOptions o = options(in, out, tok, 5000);
    o.force = true;
    const PrepareResult r = prepare_corpus(o);
    const Tokenizer t = Tokenizer::load(tok);
    const auto train = documents_of(out, Split::train, t), val = documents_of(out, Split::val, t);
    REQUIRE(train.size() == r.manifest.train.documents);
    REQUIRE(val.size() == r.manifest.val.documents);
    REQUIRE(train.size() + val.size() == n_docs);
    REQUIRE(val.size() > n_docs / 10);
    REQUIRE(val.size() < n_docs * 3 / 10);
    std::map<std::string, int> where;
    for (const auto& d : train) ++where[d];
    for (const auto& d : val) where[d] += 100;
    int last_train = -1, last_val = -1;
    for (int i = 0; i < n_docs; ++i) {
      const std::string d = document(i);
      INFO("document " << i);
      REQUIRE((where[d] == 1 || where[d] == 100));  // whole, once, in one split
      REQUIRE(o.split.validation(d) == (where[d] == 100));
      int& last = where[d] == 1 ? last_train : last_val;
      const auto& list = where[d] == 1 ? train : val;
      const auto pos = static_cast<int>(std::find(list.begin(), list.end(), d) - list.begin());
      REQUIRE(pos > last);  // input order kept
      last = pos;
    }
    // Text bytes: exactly the documents plus one separator between each two.
    std::uint64_t bytes = 0;
    for (const auto& d : train) bytes += d.size();
    REQUIRE(r.manifest.train.text_bytes == bytes + train.size() - 1);
    REQUIRE(verify_corpus(out).manifest);
    if (tok != "byte") {
      REQUIRE(fs::exists(out / "tokenizer.model"));
      REQUIRE(r.manifest.tokenizer.checksum == file_checksum(tok));
      REQUIRE(r.manifest.train.tokens * 2 < r.manifest.train.text_bytes);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("prepare: the token stream and the sampled windows do not depend on the shard size or the threads",
          "[corpus][prepare][sampler]") {
  const fs::path dir = temp_dir("shards");
  const fs::path in = write_inputs(dir);
  const std::string tok = model_for(dir, in);
  std::vector<std::vector<std::int32_t>> streams, windows, val_windows;
  std::vector<double> bpb;
  int index = 0;
  for (const auto& [shard, threads] : std::vector<std::pair<std::uint64_t, int>>{{0, 1}, {100000, 2}, {997, 2}, {4096, 3}, {64, 1}}) {
    const fs::path out = dir / ("c" + std::to_string(index++));
    PrepareOptions o = options(in, out, tok, shard);
    o.threads = threads;
    const PrepareResult r = prepare_corpus(o);
    const Corpus train = open_corpus(out, Split::train), val = open_corpus(out, Split::val);
    if (shard == 64) REQUIRE(train.shards().size() > 100);
    if (shard == 0) REQUIRE(train.shards().size() == 1);
    for (const TokenFile& f : train.shards()) REQUIRE((shard == 0 || f.count <= shard));
    streams.push_back(all_tokens(train));
    const train::TrainSampler sampler(train, 5, 48);
    std::vector<std::int32_t> x(8 * 48), y(8 * 48), all;
    for (int step = 0; step < 40; ++step) {
      sampler.batch(step, 8, x.data(), y.data());
      all.insert(all.end(), x.begin(), x.end());
      all.insert(all.end(), y.begin(), y.end());
    }
    windows.push_back(all);
    const train::ValidationSet vs(val, 48, 16);
    vs.batch(0, 8, x.data(), y.data());
    val_windows.push_back(x);
    bpb.push_back(val.bits_per_byte(1.5));
  }
  for (std::size_t i = 1; i < streams.size(); ++i) {
    REQUIRE(streams[i] == streams[0]);
    REQUIRE(windows[i] == windows[0]);
    REQUIRE(val_windows[i] == val_windows[0]);
    REQUIRE(bpb[i] == bpb[0]);
  }
  fs::remove_all(dir);
}

TEST_CASE("prepare: plain text read by paragraphs and by lines, an existing corpus is kept unless forced", "[corpus][prepare]") {
  const fs::path dir = temp_dir("units");
  write_text(dir / "t.txt", "first paragraph\nstill first\n\n\nsecond\n  \nthird line one\nthird line two\n");
  PrepareOptions o = options(dir / "t.txt", dir / "c", "byte", 0);
  o.split = {};
  o.input.unit = DocumentUnit::paragraph;
  REQUIRE(prepare_corpus(o).manifest.train.documents == 3);
  const Tokenizer byte;
  REQUIRE(byte.decode(all_tokens(open_corpus(o.out, Split::train))) == "first paragraph\nstill first\n\nsecond\n\nthird line one\nthird line two\n");
  REQUIRE_THROWS_WITH(prepare_corpus(o), Catch::Contains("already holds a corpus"));
  o.force = true;
  o.input.unit = DocumentUnit::line;
  REQUIRE(prepare_corpus(o).manifest.train.documents == 5);
  REQUIRE(byte.decode(all_tokens(open_corpus(o.out, Split::train))) == "first paragraph\nstill first\nsecond\nthird line one\nthird line two");
  fs::remove_all(dir);
}
