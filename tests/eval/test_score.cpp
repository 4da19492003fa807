// Scoring as CORE does (eval/score.hpp), with a toy byte-level model whose probabilities are set
// by hand, so every accuracy, centered accuracy and answer bits per byte below is worked out on
// paper: prompts rendered as CORE renders them, the scored span of choices that share a prefix,
// of schema options that share an ending and of language modelling, exact match, few-shot
// examples (never the item, deterministic by seed), cropping from the left, batching, subsets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "items.hpp"
#include "loopscale/eval/score.hpp"
#include "loopscale/util/text.hpp"

using namespace loopscale;
using namespace loopscale::eval;

namespace {

using loopscale::eval::test::lm_item;
using loopscale::eval::test::mc_item;
using loopscale::eval::test::schema_item;

// p(next | prev) over bytes: a bigram entry if there is one, else a unigram entry, else
// `fallback`. The argmax after a byte is the next byte of highest probability (the lowest byte of
// equals). Records what it is asked.
class ToyScorer : public Scorer {
 public:
  explicit ToyScorer(std::int64_t context = 1024, double fallback = 1.0 / 1024) : context_(context), fallback_(fallback) {}
  void bigram(char prev, char next, double p) { bigram_[{static_cast<unsigned char>(prev), static_cast<unsigned char>(next)}] = p; }
  void unigram(char next, double p) { unigram_[static_cast<unsigned char>(next)] = p; }
  void set_context(std::int64_t c) { context_ = c; }

  double prob(int prev, int next) const {
    if (const auto b = bigram_.find({prev, next}); b != bigram_.end()) return b->second;
    if (const auto u = unigram_.find(next); u != unigram_.end()) return u->second;
    return fallback_;
  }
  std::int64_t context() const override { return context_; }
  std::vector<SequenceScores> score(std::span<const std::vector<std::int32_t>> sequences) override {
    calls.push_back(sequences.size());
    std::vector<SequenceScores> out;
    for (const auto& s : sequences) {
      REQUIRE(s.size() >= 2);
      REQUIRE(static_cast<std::int64_t>(s.size()) <= context_);
      received.push_back(std::string(s.begin(), s.end()));
      SequenceScores r;
      for (std::size_t t = 0; t + 1 < s.size(); ++t) {
        r.logp.push_back(static_cast<float>(std::log(prob(s[t], s[t + 1]))));
        int best = 0;
        for (int b = 1; b < 256; ++b)
          if (prob(s[t], b) > prob(s[t], best)) best = b;
        r.argmax.push_back(best);
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  std::vector<std::size_t> calls;     // sequences per call
  std::vector<std::string> received;  // every sequence, as text

 private:
  std::int64_t context_;
  double fallback_;
  std::map<std::pair<int, int>, double> bigram_;
  std::map<int, double> unigram_;
};

// The toy model every hand-worked case below uses (bits = -log2 p):
//   unigram   a 1/4 (2 bits), b 1/8 (3 bits)
//   bigram    a->' ' 1/2 (1), b->' ' 1/8 (3), ' '->z 1/4 (2), z->z 1/2 (1),
//             n->' ' 1/2 (1), ' '->o 1/2 (1), o->p 1/2 (1)
//   else      1/1024 (10 bits)
// so the argmax after n is ' ', after ' ' is o, after o is p.
ToyScorer toy(std::int64_t context = 1024) {
  ToyScorer s(context);
  s.unigram('a', 0.25);
  s.unigram('b', 0.125);
  s.bigram('a', ' ', 0.5);
  s.bigram('b', ' ', 0.125);
  s.bigram(' ', 'z', 0.25);
  s.bigram('z', 'z', 0.5);
  s.bigram('n', ' ', 0.5);
  s.bigram(' ', 'o', 0.5);
  s.bigram('o', 'p', 0.5);
  return s;
}

Item mc(std::vector<std::string> choices, std::int64_t gold, std::string query = "Q") {
  return mc_item(std::move(query), std::move(choices), gold);
}

// Multiple choice, query "Q", delimiter ":": the scored span is what follows the choices' common
// prefix "Q:zz" (or "Q:"), so "zza" scores "a" (2 bits) and "zzbb" scores "bb" (3 bits a token).
// Over whole choices the mean would pick "zzbb" ((10+1+3+3)/4 < (10+1+2)/3): the span matters.
//   row 1  zza | zzbb, gold 0: a (2) < bb (3)  -> 0, correct    gold bits 2, bytes 1
//   row 2  zzbb | zza, gold 1: -> 1, correct                    bits 2, bytes 1
//   row 3  zzbb | zza, gold 0: -> 1, wrong                      bits 6, bytes 2
//   row 4  c | a,      gold 0: c (10) > a (2) -> 1, wrong       bits 10, bytes 1
// accuracy 1/2; baseline 1/4: centered (1/2 - 1/4) / (3/4) = 1/3; bpb 20 / 5 = 4.
Task mc_task() {
  Task t;
  t.label = "mc";
  t.type = TaskType::multiple_choice;
  t.axis = Axis::reasoning_primitives;
  t.continuation_delimiter = ":";
  t.random_baseline = 0.25;
  t.items = {mc({"zza", "zzbb"}, 0), mc({"zzbb", "zza"}, 1), mc({"zzbb", "zza"}, 0), mc({"c", "a"}, 0)};
  return t;
}

// Schema, delimiter " ", continuation "zz": the span is the common ending " zz".
//   row 1  xa | xb, gold 0: a->' ' 1 + ' '->z 2 + z->z 1 = 4 bits (mean 4/3) vs 3+2+1 = 6 (mean 2) -> 0, correct, bits 4
//   row 2  xb | xa, gold 0: -> 1, wrong, gold bits 6
// accuracy 1/2; baseline 1/2: centered 0; bpb 10 / 6.
Task schema_task() {
  Task t;
  t.label = "schema";
  t.type = TaskType::schema;
  t.axis = Axis::reasoning_primitives;
  t.continuation_delimiter = " ";
  t.random_baseline = 0.5;
  t.items = {schema_item({"xa", "xb"}, "zz", 0), schema_item({"xb", "xa"}, "zz", 0)};
  return t;
}

// Language modelling, delimiter " ": "mn " + "op" is scored as " op" after "mn" (the context's
// trailing space trimmed, the delimiter's space part of the span, as CORE).
//   row 1  " op": n->' ' 1, ' '->o 1, o->p 1 = 3 bits; argmax ' ', o, p: exact match
//   row 2  " oq": 1 + 1 + 10 = 12 bits; the argmax after o is p, not q: wrong
// accuracy 1/2; baseline 0: centered 1/2; bpb 15 / 6 = 2.5.
Task lm_task() {
  Task t;
  t.label = "lm";
  t.type = TaskType::language_modeling;
  t.axis = Axis::reading_comprehension;
  t.continuation_delimiter = " ";
  t.random_baseline = 0;
  t.items = {lm_item("mn ", "op"), lm_item("mn", "oq")};
  return t;
}

std::string bundle_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const bundle_error& e) {
    const std::string m = e.what();
    CHECK(m.find('\n') == std::string::npos);
    return m;
  }
  FAIL("no bundle_error was thrown");
  return "";
}

const data::Tokenizer bytes;  // the byte-level tokenizer: token = byte

}  // namespace

TEST_CASE("score: prompts are rendered as CORE renders them", "[eval]") {
  Task m;
  m.type = TaskType::multiple_choice;
  m.continuation_delimiter = "\nAnswer: ";
  m.example_delimiter = "\n\n";
  m.items = {mc({"a", "b"}, 1, "Q1"), mc({"x", "y"}, 0, "Q2"), mc({"u", "v"}, 1, "Q3")};
  const std::vector<std::int64_t> shots = {2, 1};
  REQUIRE(render_prompts(m, m.items[0], shots) ==
          std::vector<std::string>{"Q3\nAnswer: v\n\nQ2\nAnswer: x\n\nQ1\nAnswer: a", "Q3\nAnswer: v\n\nQ2\nAnswer: x\n\nQ1\nAnswer: b"});
  REQUIRE(render_prompts(m, m.items[0], {}) == std::vector<std::string>{"Q1\nAnswer: a", "Q1\nAnswer: b"});

  Task s;
  s.type = TaskType::schema;
  s.continuation_delimiter = " ";
  s.example_delimiter = "\n\n";
  s.items = {schema_item({"A", "B"}, "k", 0), schema_item({"c0", "c1"}, "j", 1)};
  const std::vector<std::int64_t> one = {1};
  REQUIRE(render_prompts(s, s.items[0], one) == std::vector<std::string>{"c1 j\n\nA k", "c1 j\n\nB k"});

  // Language modelling: contexts trimmed (Jinja's trim), `without` stripped again (CORE strips it).
  Task l;
  l.type = TaskType::language_modeling;
  l.continuation_delimiter = " ";
  l.example_delimiter = "\n\n";
  l.items = {lm_item("ctx1  ", "z"), lm_item(" \tctx2 \n", "y")};
  REQUIRE(render_prompts(l, l.items[0], one) == std::vector<std::string>{"ctx2 y\n\nctx1", "ctx2 y\n\nctx1 z"});
  // As Python's str.strip(): Unicode spaces too (U+00A0, U+3000, U+2009), but not other characters.
  REQUIRE(strip_whitespace("\u00a0 x y\u3000\u2009") == "x y");
  REQUIRE(strip_whitespace(" d\u00e9j\u00e0 ") == "d\u00e9j\u00e0");
  REQUIRE(strip_whitespace(" \t\n") == "");
  REQUIRE(strip_whitespace("\u00e9") == "\u00e9");
}

TEST_CASE("score: multiple choice scores the part of each choice the others do not share", "[eval]") {
  ToyScorer s = toy();
  const Task t = mc_task();
  const PreparedItem p = prepare_item(t, 0, bytes, s.context());
  REQUIRE(p.sequences[0] == bytes.encode("Q:zza"));
  REQUIRE(p.start == std::vector<std::int64_t>{4, 4});  // after "Q:zz"
  REQUIRE(p.end == std::vector<std::int64_t>{5, 6});

  const TaskResult r = evaluate_task(t, s, bytes);
  REQUIRE(r.n == 4);
  REQUIRE(r.correct == 2);
  REQUIRE(r.accuracy == 0.5);
  REQUIRE(r.centered == Approx(1.0 / 3));
  REQUIRE(r.answer_bits == Approx(20).epsilon(1e-6));
  REQUIRE(r.answer_bytes == 5);
  REQUIRE(r.answer_bpb == Approx(4).epsilon(1e-6));

  // The verdict on row 1 item by item: mean losses in nats per token of the spans.
  ToyScorer s2 = toy();
  const PreparedItem p0 = prepare_item(t, 0, bytes, s2.context());
  const auto scores = s2.score(p0.sequences);
  const ItemScore v = judge_item(t, t.items[0], p0, scores, bytes);
  REQUIRE(v.predicted == 0);
  REQUIRE(v.correct);
  REQUIRE(v.mean_loss[0] == Approx(2 * std::log(2.0)).epsilon(1e-6));
  REQUIRE(v.mean_loss[1] == Approx(3 * std::log(2.0)).epsilon(1e-6));
}

TEST_CASE("score: schema scores the shared continuation under each context", "[eval]") {
  ToyScorer s = toy();
  const Task t = schema_task();
  const PreparedItem p = prepare_item(t, 0, bytes, s.context());
  REQUIRE(p.start == std::vector<std::int64_t>{2, 2});  // " zz" of "xa zz"
  REQUIRE(p.end == std::vector<std::int64_t>{5, 5});
  const TaskResult r = evaluate_task(t, s, bytes);
  REQUIRE(r.n == 2);
  REQUIRE(r.accuracy == 0.5);
  REQUIRE(r.centered == 0);
  REQUIRE(r.answer_bits == Approx(10).epsilon(1e-6));
  REQUIRE(r.answer_bytes == 6);

  // Options that end alike: the common ending, CORE's span, reaches into them (" x zz").
  Task u = t;
  u.items = {schema_item({"p x", "q x"}, "zz", 0)};
  const PreparedItem q = prepare_item(u, 0, bytes, s.context());
  REQUIRE(q.start == std::vector<std::int64_t>{1, 1});
  REQUIRE(q.end == std::vector<std::int64_t>{6, 6});
}

TEST_CASE("score: language modelling is greedy exact match over the continuation", "[eval]") {
  ToyScorer s = toy();
  const Task t = lm_task();
  const PreparedItem p = prepare_item(t, 0, bytes, s.context());
  REQUIRE(p.sequences == std::vector<std::vector<std::int32_t>>{bytes.encode("mn op")});
  REQUIRE(p.start[0] == 2);
  REQUIRE(p.end[0] == 5);
  const TaskResult r = evaluate_task(t, s, bytes);
  REQUIRE(r.correct == 1);
  REQUIRE(r.accuracy == 0.5);
  REQUIRE(r.centered == 0.5);
  REQUIRE(r.answer_bits == Approx(15).epsilon(1e-6));
  REQUIRE(r.answer_bytes == 6);
  REQUIRE(r.answer_bpb == Approx(2.5).epsilon(1e-6));
}

TEST_CASE("score: a bundle's tasks, its axes and the CORE metric, as JSON and as a table", "[eval]") {
  Bundle b;
  b.name = "toy";
  b.tasks = {mc_task(), lm_task(), schema_task()};
  ToyScorer s = toy();
  const EvalResults r = evaluate(b, s, bytes);
  REQUIRE(r.tasks.size() == 3);
  REQUIRE(r.tasks[1].label == "lm");
  // reading_comprehension (lm) comes before reasoning_primitives (mc, schema) in task.hpp's order.
  REQUIRE(r.axes.size() == 2);
  const AxisResult& reading = r.axes[0];
  REQUIRE(reading.axis == Axis::reading_comprehension);
  REQUIRE(reading.tasks == 1);
  REQUIRE(reading.centered == 0.5);
  const AxisResult& reasoning = r.axes[1];
  REQUIRE(reasoning.axis == Axis::reasoning_primitives);
  REQUIRE(reasoning.tasks == 2);
  REQUIRE(reasoning.accuracy == 0.5);                     // (1/2 + 1/2) / 2
  REQUIRE(reasoning.centered == Approx(1.0 / 6));         // (1/3 + 0) / 2
  REQUIRE(reasoning.answer_bytes == 11);                  // 5 + 6
  REQUIRE(reasoning.answer_bpb == Approx(30.0 / 11).epsilon(1e-6));  // (20 + 10) / 11, pooled
  REQUIRE(r.core == Approx(5.0 / 18));                    // (1/3 + 1/2 + 0) / 3

  const nlohmann::json j = to_json(r);
  REQUIRE(j.at("bundle") == "toy");
  REQUIRE(j.at("tasks").size() == 3);
  REQUIRE(j.at("tasks")[0].at("label") == "mc");
  REQUIRE(j.at("tasks")[0].at("type") == "multiple_choice");
  REQUIRE(j.at("tasks")[0].at("axis") == "reasoning_primitives");
  REQUIRE(j.at("tasks")[0].at("n") == 4);
  REQUIRE(j.at("tasks")[0].at("correct") == 2);
  REQUIRE(j.at("tasks")[0].at("answer_bytes") == 5);
  REQUIRE(j.at("tasks")[0].at("centered").get<double>() == Approx(1.0 / 3));
  REQUIRE(j.at("axes")[1].at("answer_bpb").get<double>() == Approx(30.0 / 11).epsilon(1e-6));
  REQUIRE(j.at("core").get<double>() == Approx(5.0 / 18));
  REQUIRE(nlohmann::json::parse(j.dump()) == j);  // one line of results.jsonl

  const std::string table = format_table(r);
  CHECK_THAT(table, Catch::Contains("schema"));
  CHECK_THAT(table, Catch::Contains("reading_comprehension"));
  CHECK_THAT(table, Catch::Contains("0.3333"));  // mc's centered accuracy
  CHECK_THAT(table, Catch::Contains("CORE (mean centered accuracy over 3 tasks): 0.2778"));
}

TEST_CASE("score: few-shot examples are other rows, drawn deterministically by the seed", "[eval]") {
  for (const std::int64_t n : {2, 3, 10, 1000})
    for (const std::int64_t k : {std::int64_t{1}, std::int64_t{3}, n - 1}) {
      if (k > n - 1) continue;
      for (std::int64_t row = 0; row < std::min<std::int64_t>(n, 40); ++row) {
        const auto shots = fewshot_rows(n, row, k, 1234);
        REQUIRE(static_cast<std::int64_t>(shots.size()) == k);
        std::set<std::int64_t> seen(shots.begin(), shots.end());
        REQUIRE(static_cast<std::int64_t>(seen.size()) == k);  // distinct
        REQUIRE(!seen.contains(row));                          // never the item
        REQUIRE(*seen.begin() >= 0);
        REQUIRE(*seen.rbegin() < n);
        REQUIRE(fewshot_rows(n, row, k, 1234) == shots);       // deterministic
      }
    }
  REQUIRE(fewshot_rows(5, 0, 0, 1).empty());
  REQUIRE_THROWS_AS(fewshot_rows(3, 0, 3, 1), std::invalid_argument);
  bool differs = false;  // another seed, other draws
  for (std::int64_t row = 0; row < 20; ++row) differs = differs || fewshot_rows(100, row, 3, 1) != fewshot_rows(100, row, 3, 2);
  REQUIRE(differs);

  // Through evaluate: each prompt holds two other rows' examples, then its own row, once.
  Task t;
  t.label = "shots";
  t.type = TaskType::language_modeling;
  t.num_fewshot = 2;
  t.example_delimiter = "\n\n";
  for (int i = 0; i < 6; ++i) t.items.push_back(lm_item(concat("c", i), concat("v", i)));
  ToyScorer s1 = toy(), s2 = toy(), s3 = toy();
  evaluate_task(t, s1, bytes);
  REQUIRE(s1.received.size() == 6);
  for (int i = 0; i < 6; ++i) {
    const std::string& seq = s1.received[static_cast<std::size_t>(i)];
    const std::string own = concat("c", i, " v", i);
    REQUIRE(seq.size() > own.size());
    REQUIRE(seq.substr(seq.size() - own.size()) == own);
    REQUIRE(seq.find(concat("c", i)) == seq.size() - own.size());  // not among the examples
    REQUIRE(std::count(seq.begin(), seq.end(), '\n') == 4);                  // two examples, each ending "\n\n"
  }
  evaluate_task(t, s2, bytes);
  REQUIRE(s2.received == s1.received);
  EvalOptions other;
  other.seed = 99;
  evaluate_task(t, s3, bytes, other);
  REQUIRE(s3.received != s1.received);
}

TEST_CASE("score: sequences longer than the context lose tokens from the left, the span stays whole", "[eval]") {
  Task t = lm_task();
  t.items = {lm_item("0123456789mn", "op")};
  ToyScorer s = toy(8);
  const PreparedItem p = prepare_item(t, 0, bytes, 8);
  REQUIRE(p.sequences[0] == bytes.encode("789mn op"));  // "0123456789mn op" less its first 7
  REQUIRE(p.start[0] == 5);
  REQUIRE(p.end[0] == 8);
  const TaskResult r = evaluate_task(t, s, bytes);
  REQUIRE(s.received == std::vector<std::string>{"789mn op"});
  REQUIRE(r.correct == 1);
  REQUIRE(r.answer_bits == Approx(3).epsilon(1e-6));

  // Choices are cropped each by its own length.
  Task m = mc_task();
  m.items = {mc({"zza", "zzbb"}, 0, "long query")};
  const PreparedItem q = prepare_item(m, 0, bytes, 4);
  REQUIRE(q.sequences[0] == bytes.encode(":zza"));
  REQUIRE(q.sequences[1] == bytes.encode("zzbb"));
  REQUIRE(q.start == std::vector<std::int64_t>{3, 2});
  REQUIRE(q.end == std::vector<std::int64_t>{4, 4});

  // The span " op" (3 tokens) needs a context of 4: one token before it.
  REQUIRE(prepare_item(t, 0, bytes, 4).sequences[0] == bytes.encode("n op"));
  ToyScorer tiny = toy(3);
  CHECK_THAT(bundle_error_of([&] { evaluate_task(t, tiny, bytes); }),
             Catch::Contains("task \"lm\" row 1: the scored span of the continuation is 3 tokens; a scorer context of 3 tokens holds at most 2"));
}

TEST_CASE("score: evaluate_parallel scores whole tasks on several threads, with evaluate's results in bundle order", "[eval]") {
  // Deterministic and free of test assertions (Catch's are not for several threads): the log
  // probability of a byte after another is a fixed function of the two; the argmax is prev + 1.
  struct Hashed : Scorer {
    std::string fail_on;  // a sequence containing this throws
    std::int64_t context() const override { return 1024; }
    std::vector<SequenceScores> score(std::span<const std::vector<std::int32_t>> sequences) override {
      std::vector<SequenceScores> out;
      for (const auto& s : sequences) {
        const std::string text(s.begin(), s.end());
        if (!fail_on.empty() && text.find(fail_on) != std::string::npos) throw std::runtime_error("hashed: refused " + text);
        SequenceScores r;
        for (std::size_t t = 0; t + 1 < s.size(); ++t) {
          r.logp.push_back(-static_cast<float>(1 + (s[t] * 31 + s[t + 1]) % 7) / 4.0f);
          r.argmax.push_back((s[t] + 1) % 256);
        }
        out.push_back(std::move(r));
      }
      return out;
    }
  };
  Bundle b;
  b.name = "toy";
  Task lm2 = lm_task(), mc2 = mc_task();
  lm2.label = "lm2";
  mc2.label = "mc2";
  b.tasks = {mc_task(), lm_task(), schema_task(), lm2, mc2};
  Hashed one;
  const nlohmann::json serial = to_json(evaluate(b, one, bytes));
  for (const int threads : {1, 2, 3, 8}) {
    INFO(threads << " threads");
    std::atomic<int> made{0};
    const auto make = [&]() -> std::unique_ptr<Scorer> {
      ++made;
      return std::make_unique<Hashed>();
    };
    CHECK(to_json(evaluate_parallel(b, make, bytes, EvalOptions{}, threads)) == serial);
    CHECK(made.load() >= 1);
    CHECK(made.load() <= std::min(threads, 5));
  }
  // Three tasks fail: the first in bundle order is the error, whichever thread met one first.
  const auto failing = [&]() -> std::unique_ptr<Scorer> {
    auto h = std::make_unique<Hashed>();
    h->fail_on = "zz";  // in the rows of mc, schema and mc2
    return h;
  };
  for (int rep = 0; rep < 5; ++rep)
    REQUIRE_THROWS_WITH(evaluate_parallel(b, failing, bytes, EvalOptions{}, 3),
                        Catch::StartsWith("hashed: refused Q:") && !Catch::Contains("xa"));  // mc's prompt, not schema's
  // The bundle is checked before anything is scored, as evaluate checks it.
  b.tasks = {lm_task(), lm_task()};
  CHECK_THAT(bundle_error_of([&] { evaluate_parallel(b, failing, bytes, EvalOptions{}, 2); }), Catch::Contains("label \"lm\" is used twice"));
}

TEST_CASE("score: items that cannot be scored are errors naming the task and the row", "[eval]") {
  ToyScorer s = toy();
  Task m = mc_task();
  m.items.push_back(mc({"ab", "abc"}, 0));  // "ab" is all shared
  CHECK_THAT(bundle_error_of([&] { evaluate_task(m, s, bytes); }),
             Catch::Contains("task \"mc\" row 5: choice 0 has nothing to score: its tokens are all shared with the other choices"));

  // Nothing before the span: an empty query and delimiter. A prefix (CORE's BOS) mends it.
  Task e = mc_task();
  e.continuation_delimiter = "";
  e.items = {mc({"a", "b"}, 0, "")};
  CHECK_THAT(bundle_error_of([&] { evaluate_task(e, s, bytes); }),
             Catch::Contains("task \"mc\" row 1: nothing comes before the scored span of choice 0"));
  EvalOptions with_prefix;
  with_prefix.prefix = {'\n'};
  const TaskResult r = evaluate_task(e, s, bytes, with_prefix);
  REQUIRE(r.correct == 1);  // a (2 bits) before b (3)
  REQUIRE(s.received.back() == "\nb");

  // A bundle built in code is checked as read_bundle checks one.
  Task g = mc_task();
  g.items[2].gold = 5;
  Bundle b;
  b.name = "bad";
  b.tasks = {lm_task(), g};
  CHECK_THAT(bundle_error_of([&] { evaluate(b, s, bytes); }),
             Catch::Contains("bundle \"bad\": task \"mc\" row 3: gold 5 is out of range: the row has 2 choices"));
  b.tasks = {lm_task(), lm_task()};
  CHECK_THAT(bundle_error_of([&] { evaluate(b, s, bytes); }), Catch::Contains("label \"lm\" is used twice"));
}

TEST_CASE("score: sequences go to the scorer in batches that never split an item", "[eval]") {
  const Task t = mc_task();  // 4 items of 2 choices
  std::vector<TaskResult> results;
  const auto run = [&](std::int64_t batch) {
    ToyScorer s = toy();
    EvalOptions o;
    o.batch = batch;
    results.push_back(evaluate_task(t, s, bytes, o));
    return s.calls;
  };
  REQUIRE(run(1) == std::vector<std::size_t>{2, 2, 2, 2});
  REQUIRE(run(3) == std::vector<std::size_t>{2, 2, 2, 2});
  REQUIRE(run(4) == std::vector<std::size_t>{4, 4});
  REQUIRE(run(5) == std::vector<std::size_t>{4, 4});
  REQUIRE(run(100) == std::vector<std::size_t>{8});
  for (const TaskResult& r : results) {
    REQUIRE(r.correct == results[0].correct);
    REQUIRE(r.answer_bits == results[0].answer_bits);
  }
  ToyScorer s = toy();
  EvalOptions zero;
  zero.batch = 0;
  REQUIRE_THROWS_AS(evaluate_task(t, s, bytes, zero), std::invalid_argument);
}

TEST_CASE("score: max_per_task evaluates a subset drawn by the seed", "[eval]") {
  REQUIRE(select_rows(5, 0, 1) == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  REQUIRE(select_rows(5, 9, 1) == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  const auto a = select_rows(100, 10, 7);
  REQUIRE(a.size() == 10);
  REQUIRE(std::is_sorted(a.begin(), a.end()));
  REQUIRE(std::adjacent_find(a.begin(), a.end()) == a.end());
  REQUIRE(a.back() < 100);
  REQUIRE(select_rows(100, 10, 7) == a);
  REQUIRE(select_rows(100, 10, 8) != a);

  Task t = lm_task();
  t.items.clear();
  for (int i = 0; i < 10; ++i) t.items.push_back(lm_item("mn", i % 2 == 0 ? "op" : "oq"));
  ToyScorer s = toy();
  EvalOptions o;
  o.max_per_task = 4;
  const TaskResult r = evaluate_task(t, s, bytes, o);
  REQUIRE(r.n == 4);
  REQUIRE(s.received.size() == 4);
  std::int64_t even = 0;  // the rows that match exactly are the even ones
  for (const std::int64_t row : select_rows(10, 4, o.seed)) even += row % 2 == 0 ? 1 : 0;
  REQUIRE(r.correct == even);
}

TEST_CASE("score: a scorer that breaks its contract is reported", "[eval]") {
  struct Short : Scorer {
    std::int64_t context() const override { return 64; }
    std::vector<SequenceScores> score(std::span<const std::vector<std::int32_t>> sequences) override {
      return std::vector<SequenceScores>(sequences.size());  // no log-probabilities at all
    }
  } bad;
  REQUIRE_THROWS_WITH(evaluate_task(lm_task(), bad, bytes), Catch::Contains("the scorer returned 0 log-probabilities"));
}

TEST_CASE("score: check_scorable finds a row too long for the context and a num_fewshot that cannot fit, before anything is scored", "[eval]") {
  // A row whose continuation is longer than the context: evaluation met it only when it reached
  // the row, after the tasks before it (and, in `loopscale eval`, the validation windows and the
  // earlier r_eval values) were scored. check_scorable gives the same error without a forward.
  Task longer = lm_task();
  longer.label = "long";
  longer.dataset_uri = "long.jsonl";
  longer.items.push_back(lm_item("mn", std::string(40, 'o')));
  Bundle b;
  b.name = "b";
  b.tasks = {lm_task(), longer};
  const std::string err = bundle_error_of([&] { check_scorable(b, bytes, 16); });
  CHECK_THAT(err, Catch::Contains("eval: long.jsonl: task \"long\" row 3: the scored span of the continuation is 41 tokens"));
  ToyScorer s = toy(16);
  CHECK(bundle_error_of([&] { evaluate(b, s, bytes); }) == err);
  // Only the rows the evaluation selects are prepared: a subset without the long row passes.
  EvalOptions one;
  one.max_per_task = 1;
  for (one.seed = 0; select_rows(3, 1, one.seed).front() == 2; ++one.seed) {
  }
  CHECK_NOTHROW(check_scorable(b, bytes, 16, one));
  CHECK_NOTHROW(check_scorable(b, bytes, 64, {}, 2));

  // num_fewshot at or past the context: every example takes a token, so they cannot all fit, and
  // each prompt rendered and encoded all of them before cropping (19999 of 20000 rows hung).
  Task many = lm_task();
  many.label = "many";
  many.dataset_uri = "many.jsonl";
  many.items.clear();
  for (int i = 0; i < 40; ++i) many.items.push_back(lm_item("mn", "op"));
  many.num_fewshot = 33;
  b.tasks = {many};
  const std::string msg = "eval: many.jsonl: task \"many\": num_fewshot 33 cannot fit a context of 33 tokens (at most 32 examples)";
  CHECK(bundle_error_of([&] { check_scorable(b, bytes, 33); }) == msg);
  ToyScorer t = toy(33);
  CHECK(bundle_error_of([&] { evaluate_task(many, t, bytes); }) == msg);
  CHECK(t.calls.empty());
  many.num_fewshot = 32;  // the most that can: cropped from the left as before
  b.tasks = {many};
  CHECK_NOTHROW(check_scorable(b, bytes, 33));
  CHECK(evaluate_task(many, t, bytes).n == 40);
}

TEST_CASE("score: many few-shot rows are drawn as few are, distinct and never the item", "[eval]") {
  // Past 64 shots the draws skip repeats through a set, not a scan: the same draws.
  const std::vector<std::int64_t> k64 = fewshot_rows(1000, 17, 64, 5), k300 = fewshot_rows(1000, 17, 300, 5);
  REQUIRE(k300.size() == 300);
  CHECK(std::equal(k64.begin(), k64.end(), k300.begin()));
  CHECK(std::set<std::int64_t>(k300.begin(), k300.end()).size() == 300);
  CHECK(std::find(k300.begin(), k300.end(), 17) == k300.end());
}
