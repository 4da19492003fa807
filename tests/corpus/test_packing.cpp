// `data prepare --pack T`: rows of whole documents after their BOS, best-fit packed as the paper's
// code packs them (data/packing.hpp), and training reading them row by row (train/data.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "cli/run_cli.hpp"
#include "corpus/helpers.hpp"
#include "corpus/tiny_run.hpp"
#include "loopscale/data/packing.hpp"
#include "loopscale/data/prepare.hpp"
#include "loopscale/data/tokenizer_train.hpp"
#include "loopscale/data/verify.hpp"
#include "loopscale/eval/probes.hpp"
#include "loopscale/eval/run_model.hpp"
#include "loopscale/eval/validation.hpp"
#include "loopscale/train/trainer.hpp"

using namespace loopscale;
using namespace loopscale::data;
using namespace loopscale::test;

namespace {

using Doc = std::vector<std::int32_t>;

// Documents of the given lengths, document k's tokens all k * 100 + their position (so a row
// shows which documents it holds and where each was cut).
std::vector<Doc> pack_docs(const std::vector<int>& lengths) {
  std::vector<Doc> docs;
  for (std::size_t k = 0; k < lengths.size(); ++k) {
    Doc d;
    for (int i = 0; i < lengths[k]; ++i) d.push_back(static_cast<std::int32_t>(k * 100 + static_cast<std::size_t>(i)));
    docs.push_back(d);
  }
  return docs;
}

std::vector<Doc> pack_with(const std::vector<Doc>& docs, std::uint64_t row, std::uint64_t buffer) {
  RowPacker p(row, buffer);
  std::vector<Doc> rows;
  const auto keep = [&](std::span<const std::int32_t> r) { rows.emplace_back(r.begin(), r.end()); };
  for (const Doc& d : docs) p.add(d, keep);
  p.finish(keep);
  return rows;
}

// The paper's packing as its code writes it (a list, scanned): the reference the packer must equal.
std::vector<Doc> pack_reference(const std::vector<Doc>& docs, std::size_t row, std::size_t buffer_size) {
  std::vector<Doc> buffer, rows;
  std::size_t next = 0;
  for (;;) {
    while (buffer.size() < buffer_size && next < docs.size()) buffer.push_back(docs[next++]);
    if (buffer.empty()) break;
    Doc r;
    while (r.size() < row && !buffer.empty()) {
      const std::size_t room = row - r.size();
      std::ptrdiff_t best = -1;
      std::size_t best_len = 0;
      for (std::size_t i = 0; i < buffer.size(); ++i)
        if (buffer[i].size() <= room && buffer[i].size() > best_len) best = static_cast<std::ptrdiff_t>(i), best_len = buffer[i].size();
      if (best >= 0) {
        r.insert(r.end(), buffer[static_cast<std::size_t>(best)].begin(), buffer[static_cast<std::size_t>(best)].end());
        buffer.erase(buffer.begin() + best);
      } else {
        std::size_t shortest = 0;
        for (std::size_t i = 1; i < buffer.size(); ++i)
          if (buffer[i].size() < buffer[shortest].size()) shortest = i;
        r.insert(r.end(), buffer[shortest].begin(), buffer[shortest].begin() + static_cast<std::ptrdiff_t>(room));
        buffer.erase(buffer.begin() + static_cast<std::ptrdiff_t>(shortest));
      }
    }
    if (r.size() != row) break;
    rows.push_back(r);
  }
  return rows;
}

// A SentencePiece model with a BOS piece, trained on documents 0..n.
std::string pack_model(const fs::path& dir, const fs::path& docs, bool bos) {
  TokenizerTrainOptions o;
  o.input.paths = {docs.string()};
  o.vocab = 450;
  o.bos = bos;
  const fs::path p = dir / (bos ? "bos.model" : "nobos.model");
  write_text(p, train_tokenizer(o).model);
  return p.string();
}

fs::path pack_inputs(const fs::path& dir, int n) {
  std::ofstream f(dir / "docs.jsonl");
  for (int i = 0; i < n; ++i) f << nlohmann::json{{"text", document(i)}}.dump() << "\n";
  return dir / "docs.jsonl";
}

PrepareOptions pack_options(const fs::path& in, const fs::path& out, const std::string& tok, std::uint64_t seq_len) {
  PrepareOptions o;
  o.input.paths = {in.string()};
  o.tokenizer = tok;
  o.out = out;
  o.split = {0.2, 5};
  o.shard_tokens = 1000;  // rows cross shard boundaries: the stream is what is packed
  o.threads = 2;
  o.pack.row_tokens = seq_len + 1;
  o.pack.buffer = 16;
  o.pack.shuffle_rows = 7;
  return o;
}

}  // namespace

TEST_CASE("packing: the longest waiting document that fits, else the shortest cut, worked by hand", "[corpus][packing]") {
  // Rows of 8, a buffer of 3: a(3) b(5) c(4) fill the buffer; the row takes b (5), then a (3).
  // d(2) e(9) refill it; the row takes c (4), d (2), then none fits and e, the shortest left, is
  // cut to 2. f(1) alone cannot fill a row: dropped with the end of the input.
  const std::vector<Doc> docs = pack_docs({3, 5, 4, 2, 9, 1});
  const std::vector<Doc> rows = pack_with(docs, 8, 3);
  REQUIRE(rows == std::vector<Doc>{{100, 101, 102, 103, 104, 0, 1, 2}, {200, 201, 202, 203, 300, 301, 400, 401}});
  // The documents counted are those of the rows written: b and a, c, d and e's head; not f.
  {
    RowPacker p(8, 3);
    const auto none = [](std::span<const std::int32_t>) {};
    for (const Doc& d : docs) p.add(d, none);
    p.finish(none);
    REQUIRE(p.documents_started() == 5);
    // 9 2 3 fill the buffer: one row of 3, 2 and 9 cut; then 2 and 3 cannot fill a row, and are not counted.
    RowPacker q(8, 3);
    for (const Doc& d : pack_docs({9, 2, 3, 2, 3})) q.add(d, none);
    q.finish(none);
    REQUIRE(q.documents_started() == 3);
  }
  // Equal lengths: the one that came first goes first.
  REQUIRE(pack_with(pack_docs({2, 2, 2}), 4, 3) == std::vector<Doc>{{0, 1, 100, 101}});
  // A buffer of one: a document longer than the row is cut; one shorter leaves the row unfilled
  // before the input ends, which the paper's code would take as the end of its input.
  REQUIRE(pack_with(pack_docs({6, 5}), 4, 1) == std::vector<Doc>{{0, 1, 2, 3}, {100, 101, 102, 103}});
  REQUIRE_THROWS_WITH(pack_with(pack_docs({6, 3, 2}), 4, 1), Catch::Contains("1 documents could not fill a row of 4") && Catch::Contains("--pack-buffer"));
}

TEST_CASE("packing: rows equal the paper's scanned-list packing on random documents", "[corpus][packing]") {
  SplitMix64 r{42};
  for (const auto& [row, buffer] : {std::pair{64, 10}, std::pair{64, 30}, std::pair{129, 100}, std::pair{17, 1000}}) {
    std::vector<int> lengths;
    for (int i = 0; i < 3000; ++i) lengths.push_back(1 + static_cast<int>(r.next() % (i % 5 == 0 ? 300 : 40)));
    const std::vector<Doc> docs = pack_docs(lengths);
    INFO("row " << row << ", buffer " << buffer);
    const std::vector<Doc> rows = pack_with(docs, static_cast<std::uint64_t>(row), static_cast<std::uint64_t>(buffer));
    REQUIRE(rows.size() > 100);
    REQUIRE(rows == pack_reference(docs, static_cast<std::size_t>(row), static_cast<std::size_t>(buffer)));
  }
}

TEST_CASE("packing: data prepare --pack writes rows that each begin with a BOS, of whole documents or their cut heads",
          "[corpus][packing]") {
  const fs::path dir = temp_dir("pack_prepare");
  const fs::path in = pack_inputs(dir, 400);
  const std::string model = pack_model(dir, in, true);
  const Tokenizer tok = Tokenizer::load(model);
  REQUIRE(tok.bos_id() == 1);
  REQUIRE(tok.piece_bytes(1).empty());  // the BOS has no text: bits per byte count only the documents' bytes
  const Manifest m = prepare_corpus(pack_options(in, dir / "c", model, 32)).manifest;
  REQUIRE(m.packing.row_tokens == 33);
  REQUIRE(m.packing.bos == 1);
  REQUIRE(read_manifest(dir / "c").packing.row_tokens == 33);
  std::map<std::string, int> seen;  // each document's text, and the times a row began it
  std::size_t unnamed = 0;
  for (const Split s : {Split::train, Split::val}) {
    const Corpus c = open_corpus(dir / "c", s);
    REQUIRE(c.row_tokens() == 33);
    REQUIRE(c.rows() > 10);
    REQUIRE(c.tokens() == c.rows() * 33);
    const std::vector<std::int32_t> all = all_tokens(c);
    REQUIRE(tok.text_bytes(all) == c.text_bytes());
    for (std::uint64_t row = 0; row < c.rows(); ++row) {
      const auto first = all.begin() + static_cast<std::ptrdiff_t>(row * 33);
      REQUIRE(*first == 1);
      // The row's documents: the text between its BOS tokens, each a whole document or its head.
      for (auto b = first; b != first + 33;) {
        const auto e = std::find(b + 1, first + 33, 1);
        const std::string text = tok.decode(std::vector<std::int32_t>(b + 1, e));
        const std::size_t close = text.find('>');
        const bool last = e == first + 33;
        b = e;
        if (last && close == std::string::npos) {  // cut inside its "<doc i>" marker: which one it was is not written
          REQUIRE(std::string("<doc ").rfind(text.substr(0, 5), 0) == 0);
          ++unnamed;
          continue;
        }
        REQUIRE(text.rfind("<doc ", 0) == 0);
        const std::string doc = document(std::stoi(text.substr(5, close - 5)));
        if (!last) REQUIRE(text == doc);        // not the row's last: whole
        else REQUIRE(doc.rfind(text, 0) == 0);  // the last: whole, or cut
        ++seen[doc];
      }
    }
  }
  for (const auto& [doc, n] : seen) REQUIRE(n == 1);  // no document begins twice (a cut tail is dropped, not carried)
  REQUIRE(m.train.documents + m.val.documents == seen.size() + unnamed);

  // The same folder whatever the thread count; another shuffle seed, the same rows in another order.
  PrepareOptions one = pack_options(in, dir / "c1", model, 32);
  one.threads = 1;
  prepare_corpus(one);
  PrepareOptions other = pack_options(in, dir / "c2", model, 32);
  other.pack.seed = 9;
  prepare_corpus(other);
  const std::vector<std::int32_t> a = all_tokens(open_corpus(dir / "c", Split::train)), b = all_tokens(open_corpus(dir / "c1", Split::train)),
                                  c2 = all_tokens(open_corpus(dir / "c2", Split::train));
  REQUIRE(a == b);
  REQUIRE(a != c2);
  const auto rows_of = [](const std::vector<std::int32_t>& t) {
    std::vector<std::vector<std::int32_t>> rows;
    for (std::size_t i = 0; i < t.size(); i += 33) rows.emplace_back(t.begin() + static_cast<std::ptrdiff_t>(i), t.begin() + static_cast<std::ptrdiff_t>(i + 33));
    std::sort(rows.begin(), rows.end());
    return rows;
  };
  REQUIRE(rows_of(a) == rows_of(c2));

  // data verify checks the BOS: the tokenizer's against the manifest's, and every row's first token.
  REQUIRE(verify_corpus(dir / "c").tokens == m.train.tokens + m.val.tokens);
  const fs::path mf = dir / "c2" / "manifest.json";
  nlohmann::json mj = nlohmann::json::parse(slurp(mf));
  mj["packing"]["bos"] = 2;
  write_text(mf, mj.dump());
  REQUIRE_THROWS_WITH(verify_corpus(dir / "c2"), Catch::Contains("rows begin with BOS 2") && Catch::Contains("BOS is 1"));
  mj["tokenizer"] = {{"kind", "external"}, {"vocab", 450}, {"source", "a test"}};  // no tokenizer to ask: the rows answer
  write_text(mf, mj.dump());
  REQUIRE_THROWS_WITH(verify_corpus(dir / "c2"), Catch::Contains("row 0 begins with token 1, not the BOS 2"));

  // Refused, one line each: a tokenizer without a BOS, the byte tokenizer, rows no document fills.
  REQUIRE_THROWS_WITH(prepare_corpus(pack_options(in, dir / "x", "byte", 32)), Catch::Contains("byte tokenizer has none"));
  REQUIRE_THROWS_WITH(prepare_corpus(pack_options(in, dir / "x", pack_model(dir, in, false), 32)),
                      Catch::Contains("has none") && Catch::Contains("--bos"));
  REQUIRE_THROWS_WITH(prepare_corpus(pack_options(in, dir / "x", model, 1)), Catch::Contains("--pack must be at least 2"));
  PrepareOptions few = pack_options(dir / "few.jsonl", dir / "x", model, 4000);
  write_text(dir / "few.jsonl", "{\"text\": \"one short document\"}\n");
  few.split = {0, 5};
  REQUIRE_THROWS_WITH(prepare_corpus(few), Catch::Contains("do not fill one row of 4001"));
  REQUIRE_FALSE(fs::exists(dir / "x" / "manifest.json"));
}

TEST_CASE("packing: training reads a packed split row by row, in order, epoch after epoch", "[corpus][packing][training]") {
  const fs::path dir = temp_dir("pack_train");
  const fs::path in = pack_inputs(dir, 300);
  const std::string model = pack_model(dir, in, true);
  prepare_corpus(pack_options(in, dir / "c", model, 32));
  const Corpus tr = open_corpus(dir / "c", Split::train), va = open_corpus(dir / "c", Split::val);
  const std::vector<std::int32_t> all = all_tokens(tr);
  const std::int64_t B = 4, rows = static_cast<std::int64_t>(tr.rows());
  const train::TrainSampler s(tr, 7, 32, std::nullopt, 0, 0, B);
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(B * 32)), targets(inputs.size());
  for (const std::int64_t step : {std::int64_t{0}, std::int64_t{1}, rows / B + 1, 3 * rows}) {
    s.batch(step, B, inputs.data(), targets.data());
    for (std::int64_t b = 0; b < B; ++b) {
      const std::size_t row = static_cast<std::size_t>((step * B + b) % rows);
      const auto r = all.begin() + static_cast<std::ptrdiff_t>(row * 33);
      REQUIRE(inputs[static_cast<std::size_t>(b * 32)] == 1);  // every sequence begins at a BOS
      REQUIRE(std::equal(r, r + 32, inputs.begin() + b * 32));
      REQUIRE(std::equal(r + 1, r + 33, targets.begin() + b * 32));
    }
  }
  // A part of a step's batch (a data-parallel rank's, a gradient-accumulation chunk's) reads the
  // rows of its sequences in the whole batch; a batch other than the constructor's is refused.
  std::vector<std::int32_t> part(2 * 32), part_t(part.size());
  s.batch(5, 2, 2, part.data(), part_t.data());
  for (std::int64_t i = 0; i < 2; ++i) {
    const auto r = all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>((5 * B + 2 + i) % rows) * 33);
    REQUIRE(std::equal(r, r + 32, part.begin() + i * 32));
  }
  REQUIRE_THROWS_WITH(s.batch(5, 2, part.data(), part_t.data()), Catch::Contains("batches of 4, not 2"));
  // The validation sample: the split's first rows, repeated when it has fewer.
  const train::ValidationSet v(va, 32, static_cast<std::int64_t>(va.rows()) + 2);
  REQUIRE(v.covered_tokens() == va.tokens());
  const std::vector<std::int32_t> vall = all_tokens(va);
  v.batch(static_cast<std::int64_t>(va.rows()), 1, inputs.data(), targets.data());
  REQUIRE(std::equal(vall.begin(), vall.begin() + 32, inputs.begin()));
  // The trainer's sample reads each row at most once: more windows than rows stop at whole batches
  // of rows (dropping fewer than a batch), fewer are as asked; only a split of fewer rows than one
  // batch repeats its rows (the sample above).
  const std::int64_t vr = static_cast<std::int64_t>(va.rows());
  REQUIRE(vr >= 5);
  REQUIRE(train::validation_batches(std::int64_t{1} << 30, 2, 32, va) == vr / 2);
  REQUIRE(train::validation_batches(std::int64_t{1} << 30, 4, 32, va) == vr / 4);
  REQUIRE(train::validation_batches(2 * 32, 2, 32, va) == 1);
  REQUIRE(train::validation_batches(0, 2, 32, va) == 1);
  // Rows repeated up to the bound of every sample (train::max_validation_windows: the default
  // sample's 2^17 tokens where the split has fewer windows), past it refused: 2^20 tokens, 640
  // reads of each of these rows, ran before 5 Dec 2026, and so did 1e14.
  REQUIRE(train::validation_batches(std::int64_t{1} << 17, vr + 1, 32, va) == (std::int64_t{1} << 17) / ((vr + 1) * 32));
  REQUIRE_THROWS_WITH(train::validation_batches(std::int64_t{1} << 20, vr + 1, 32, va), Catch::Contains("distinct ones (more only score the same windows again)"));
  REQUIRE(eval::trainer_validation_windows(std::int64_t{1} << 30, 4, 32, va) == vr / 4 * 4);
  // A packed split is read in rows of its own length only.
  REQUIRE_THROWS_WITH(train::TrainSampler(tr, 7, 16, std::nullopt, 0, 0, B), Catch::Contains("rows of 33") && Catch::Contains("--seq-len 32"));
  REQUIRE_THROWS_WITH(train::TrainSampler(tr, 7, 32), Catch::Contains("needs the batch size"));

  // A whole run: it trains, and a --seq-len other than the rows' is one error before the run folder.
  train::TrainConfig c = tiny_run(dir / "c", dir / "run", 450, 32, 4, 32, 8);
  // The dry run says how often the run reads the rows: 8 steps of 4 rows.
  CliResult dry = run_cli("train --d-model 32 --heads 2 --prelude 1 --coda 1 --recur-layers 1 --r 2 --vocab 450 --batch 4 --seq-len 32 --tokens 1024 --data " +
                          (dir / "c").string() + " --out " + (dir / "dry").string() + " --dry-run");
  INFO(dry.out);
  REQUIRE(dry.rc == 0);
  const nlohmann::json dj = nlohmann::json::parse(dry.out.substr(dry.out.find('{')));
  REQUIRE(dj.at("packed_rows").at("rows") == tr.rows());
  REQUIRE(dj.at("packed_rows").at("epochs").get<double>() == Approx(32.0 / static_cast<double>(tr.rows())));
  REQUIRE(dj.at("validation").at("windows") == vr / 4 * 4);  // the default eval_tokens ask for 1,024 batches of 4
  REQUIRE(dj.at("validation").at("tokens") == vr / 4 * 4 * 32);
  const train::TrainResult r = train::train(c);
  REQUIRE(r.status == "done");
  REQUIRE(std::isfinite(r.val_bpb));
  // The run records the BOS its documents began with, and evaluation and sampling put it before
  // every prompt; a run on an unpacked corpus records none.
  REQUIRE(nlohmann::json::parse(slurp(dir / "run" / "config.json")).at("tokenizer").at("bos") == 1);
  REQUIRE(eval::load_run((dir / "run").string()).document_start() == std::vector<std::int32_t>{1});
  // A multiple-choice task whose first item has an empty context: scorable only after a BOS.
  fs::create_directories(dir / "tasks");
  write_text(dir / "tasks" / "bundle.json",
             R"({"icl_tasks": [{"label": "mc", "axis": "reasoning_primitives", "dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "num_fewshot": 0,
                "continuation_delimiter": " ", "random_baseline": 0.5}]})");
  write_text(dir / "tasks" / "mc.jsonl", R"({"query": "", "choices": ["the cat", "models"], "gold": 0})" "\n"
                                         R"({"query": "<doc 1> the", "choices": ["cat", "depth"], "gold": 1})" "\n");
  CliResult e = run_cli("eval " + (dir / "run").string() + " --tasks " + (dir / "tasks").string() + " --max-per-task 2 --json");
  INFO(e.out);
  REQUIRE(e.rc == 0);
  REQUIRE(nlohmann::json::parse(e.out.substr(e.out.find('{'))).at("prefix_tokens") == std::vector<int>{1});
  REQUIRE(run_cli("sample " + (dir / "run").string() + " --prompt '<doc 3>' --max-new 4 --temperature 0").rc == 0);
  REQUIRE(run_cli("sample " + (dir / "run").string() + " --prompt '' --max-new 4 --temperature 0").rc == 0);  // a document's start
  PrepareOptions plain = pack_options(in, dir / "plain", model, 32);
  plain.pack = {};
  prepare_corpus(plain);
  REQUIRE_FALSE(tokenizer_record(dir / "plain", open_corpus(dir / "plain", Split::train)).contains("bos"));
  // Resuming on the same documents joined by a newline instead of in rows is refused.
  train::TrainConfig more = c;
  more.seq_len = 32;
  more.out = (dir / "run").string();
  more.data = (dir / "plain").string();
  more.resume = true;
  REQUIRE_THROWS_WITH(train::train(more), Catch::Contains("cannot resume") && Catch::Contains("\"bos\":1"));
  c.seq_len = 16;
  c.out = (dir / "run16").string();
  REQUIRE_THROWS_WITH(train::train(c), Catch::Contains("--seq-len 32, not 16"));
  REQUIRE_FALSE(fs::exists(dir / "run16" / "config.json"));
}

TEST_CASE("packing: data tokenizer train --bos and data prepare --pack through the program", "[corpus][packing][cli]") {
  const fs::path dir = temp_dir("pack_cli");
  const std::string in = pack_inputs(dir, 300).string(), d = dir.string();
  CliResult r = run_cli("data tokenizer train --input " + in + " --vocab 400 --bos --out " + d + "/t.model");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  r = run_cli("data prepare --quiet --input " + in + " --tokenizer " + d + "/t.model --val-fraction 0.1 --pack 64 --out " + d + "/c");
  REQUIRE(r.rc == 0);
  REQUIRE(r.out.find("rows of 65") != std::string::npos);
  REQUIRE(r.out.find("packed: ") != std::string::npos);
  REQUIRE(run_cli("data verify " + d + "/c").rc == 0);
  r = run_cli("data export --format llmc --data " + d + "/c --out " + d + "/x --shard-tokens 0");
  REQUIRE(r.rc == 0);
  REQUIRE(r.out.find("note: " + d + "/c is packed in rows of 65 tokens, each after BOS 1") != std::string::npos);
  // A sweep of another seq_len (smoke's 64) is refused once, before any run.
  REQUIRE(run_cli("data prepare --quiet --input " + in + " --tokenizer " + d + "/t.model --val-fraction 0.1 --pack 48 --out " + d + "/c48").rc == 0);
  r = run_cli("sweep run --preset smoke --data " + d + "/c48 --out " + d + "/sweep");
  INFO(r.out);
  REQUIRE(r.rc == 2);
  REQUIRE(count_lines(r.out) == 1);
  REQUIRE(r.out.find("rows of 49 tokens (data prepare --pack 48): train and evaluate it with --seq-len 48, not 64") != std::string::npos);
  REQUIRE_FALSE(fs::exists(dir / "sweep" / "results.jsonl"));
  r = run_cli("data prepare --quiet --input " + in + " --pack 64 --out " + d + "/b");
  REQUIRE(r.rc == 2);
  REQUIRE(count_lines(r.out) == 1);
  REQUIRE(r.out.find("byte tokenizer has none") != std::string::npos);
}

TEST_CASE("packing: a sweep on a packed SentencePiece corpus trains, scores the probes its tokenizer can score and leaves out the rest",
          "[corpus][packing][cli]") {
  const fs::path dir = temp_dir("pack_sweep");
  const std::string in = pack_inputs(dir, 300).string(), d = dir.string();
  // The tokenizer also learns pieces of two letters, so that it merges some of repeat's answers
  // with the letters before them: that task cannot be scored with it (and once stopped the sweep).
  {
    std::ofstream pairs(dir / "pairs.jsonl");
    std::string text;
    for (char a = 'a'; a <= 'z'; ++a)
      for (char b = 'a'; b <= 'z'; ++b)
        for (int k = 0; k < 20; ++k) text += std::string{a, b, ' '};
    pairs << nlohmann::json{{"text", text}}.dump() << "\n";
  }
  REQUIRE(run_cli("data tokenizer train --input " + in + " --input " + d + "/pairs.jsonl --vocab 400 --bos --out " + d + "/t.model").rc == 0);
  REQUIRE(run_cli("data prepare --quiet --input " + in + " --tokenizer " + d + "/t.model --val-fraction 0.1 --pack 64 --out " + d + "/c").rc == 0);
  write_text(dir / "spec.json", nlohmann::json{{"name", "packed"}, {"depth", 4}, {"prelude", 1}, {"coda", 1}, {"r", {1, 2}}, {"inject", "linear"},
                                               {"width_per_s", 16}, {"width_round", 16}, {"head_dim", 16}, {"vocab", 400}, {"vocab_multiple", 64},
                                               {"seq_len", 64}, {"batch_tokens", 256}, {"micro_batch_tokens", 256}, {"memory_limit_gib", 4.0},
                                               {"budgets", {{{"C", 1e9}, {"s", {1}}}}}, {"train", {{"eval_tokens", 256}, {"threads", 1}}},
                                               {"seed", 1}, {"data", d + "/c"}}
                                    .dump());
  const CliResult r = run_cli("sweep run " + d + "/spec.json --out " + d + "/sw --eval-items 40 --curve-windows 2");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  std::ifstream results(dir / "sw" / "results.jsonl");
  int runs = 0;
  for (std::string line; std::getline(results, line); ++runs) {
    const nlohmann::json e = nlohmann::json::parse(line).at("summary").at("eval");
    INFO(e.dump());
    // repeat is left out with its reason; the others are scored.
    REQUIRE(e.at("left_out").at("repeat").get<std::string>().find("not a prefix") != std::string::npos);
    REQUIRE(e.at("tasks").size() >= 5);
    for (const auto& t : e.at("tasks")) REQUIRE_FALSE(e.at("left_out").contains(t.at("label").get<std::string>()));
  }
  REQUIRE(runs == 2);

  // The same in the library: the cloze tasks left out with a corpus of another tokenizer, and the
  // tasks kept by leave_out_unscorable all pass check_scorable; the byte tokenizer scores them all.
  const eval::Probes p = eval::builtin_probes({1, 40, 64, dir / "c"});  // the sweep's probes
  for (const std::string cloze : {"cloze_train", "cloze_val"})
    REQUIRE(std::any_of(p.left_out.begin(), p.left_out.end(),
                        [&](const eval::LeftOut& l) { return l.label == cloze && l.reason.find("byte-level corpus") != std::string::npos; }));
  const Tokenizer tok = Tokenizer::load(d + "/t.model");
  eval::EvalOptions opt;
  opt.prefix = {1};
  eval::Bundle b = p.bundle;
  const std::vector<eval::LeftOut> out = eval::leave_out_unscorable(b, tok, 65, opt);
  REQUIRE(b.tasks.size() + out.size() == p.bundle.tasks.size());
  REQUIRE(std::any_of(out.begin(), out.end(), [](const eval::LeftOut& l) { return l.label == "repeat"; }));
  REQUIRE_FALSE(b.tasks.empty());
  REQUIRE_NOTHROW(eval::check_scorable(b, tok, 65, opt));
  for (const eval::LeftOut& l : out) REQUIRE_THROWS(eval::check_scorable(eval::Bundle{"one", {*std::find_if(p.bundle.tasks.begin(), p.bundle.tasks.end(), [&](const eval::Task& t) { return t.label == l.label; })}}, tok, 65, opt));
  eval::Bundle bytes = p.bundle;
  REQUIRE(eval::leave_out_unscorable(bytes, Tokenizer(), 65, eval::EvalOptions{}).empty());
  // Under the byte tokenizer a row refused is a fault of the suite: an error, not a task left out.
  const auto mc = std::find_if(bytes.tasks.begin(), bytes.tasks.end(), [](const eval::Task& t) { return t.type == eval::TaskType::multiple_choice; });
  REQUIRE(mc != bytes.tasks.end());
  std::vector<std::string>& choices = mc->items[0].choices;  // each begins with choice 0, which has nothing of its own: refused
  for (std::size_t j = 1; j < choices.size(); ++j) choices[j] = choices[0] + std::to_string(j);
  REQUIRE_THROWS_AS(eval::leave_out_unscorable(bytes, Tokenizer(), 65, eval::EvalOptions{}), eval::bundle_error);
}
