// Scoring a task bundle with a model, the way CORE does (DCLM's in-context-learning evaluation as
// the iso-depth paper's code runs it: nanochat/core_eval.py and scripts/base_eval.py of its
// nanochat fork), so accuracies are comparable with the paper's.
//
// Per item (a row of a task):
//   Few-shot  num_fewshot examples are drawn without replacement from the task's OTHER rows (never
//             the item itself), in drawn order, by a generator keyed by (seed, the item's row), so a
//             prompt depends neither on max_per_task nor on the other tasks. (CORE keys Python's
//             random.Random(1234 + row); the draws differ, the rule is the same.) They are drawn
//             from all of the task's rows, not only the evaluated subset. num_fewshot must be
//             below the scorer's context (fewshot_problem): every example takes a token.
//   Prompts   D = continuation_delimiter, S = example_delimiter (CORE: a blank line, "\n\n"):
//     multiple_choice  per choice c: [query D choices[gold] S] per example, then  query D c
//     schema           per option o: [context_options[gold] D continuation S] ..., then  o D continuation
//     language_modeling  [strip(context) D continuation S] ..., then
//                        without = strip(examples + strip(context) D),  with = examples + strip(context) D continuation
//             strip() removes leading and trailing whitespace as Python's str.strip() (Jinja's trim)
//             does, Unicode spaces included. So with D = " " the scored span of a language-modelling
//             row is " continuation", the delimiter's space included, as in CORE.
//   Tokens    each prompt is encoded whole, after EvalOptions::prefix (CORE puts the tokenizer's BOS
//             first; loopscale's tokenizers have none, so the default is nothing; a byte-level
//             corpus separates documents by "\n", the natural choice here).
//   Span      the tokens that are scored:
//     multiple_choice  after the common prefix of all choices' token sequences: the part of each
//                      choice that differs (choices "the cat" / "the dog" score "cat" / "dog")
//     schema           the common suffix of all options' sequences: the shared continuation (and
//                      any shared end of the options before it, as in CORE)
//     language_modeling  the tokens of `with` after those of `without`, which must be its prefix
//   Cropping  a sequence longer than the scorer's context() loses tokens from the LEFT; the span
//             always stays whole, with at least one token before it to predict its first token.
//             A span that cannot (longer than context() - 1 tokens) is a bundle_error naming the
//             task and the row, as are an empty span and a span with nothing before it.
//   Correct   multiple_choice, schema: the sequence whose span has the lowest MEAN loss (nats per
//             token) is the model's answer; ties go to the first (CORE's list.index(min)).
//             language_modeling: greedy exact match, every argmax over the span equals its token.
//
// Per task: accuracy = correct / n; centered = (accuracy - b) / (1 - b) with b the task's
// random_baseline (a fraction; CORE divides its percent by 100 first); answer bits per byte =
// (sum over items of -log2 p of the gold span's tokens) / (sum over items of the bytes those tokens
// spell): the language-modelling span, the gold choice's span, the continuation after the gold
// option. Pooled over items, so it weights long answers more, as CORE's token-weighted loss does.
// Per axis: the mean of its tasks' accuracies and of their centered accuracies (each task counts
// once), and answer bpb pooled over all their items (total bits / total bytes). `core` is the mean
// centered accuracy over all tasks, CORE's headline metric.
//
// A row number in a message counts the task's rows from 1 (its JSONL's non-blank lines).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopscale/data/tokenizer.hpp"
#include "loopscale/eval/bundle.hpp"
#include "loopscale/eval/scorer.hpp"
#include "loopscale/eval/task.hpp"
#include "loopscale/util/names.hpp"
#include "loopscale/util/random.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::eval {

struct EvalOptions {
  std::int64_t max_per_task = 0;     // 0: every row; else at most this many, a subset drawn by `seed`
  std::uint64_t seed = 1234;         // keys the subset and the few-shot draws
  std::int64_t batch = 32;           // sequences per Scorer::score call; an item's are never split,
                                     // so a call may hold more when one item alone has more
  std::vector<std::int32_t> prefix;  // tokens put before every prompt, as CORE's BOS (see above)
};

struct TaskResult {
  std::string label;
  Axis axis = Axis::reasoning_primitives;
  TaskType type = TaskType::multiple_choice;
  std::int64_t num_fewshot = 0;
  std::int64_t n = 0, correct = 0;  // items evaluated, answered correctly
  double random_baseline = 0;
  double accuracy = 0, centered = 0;
  double answer_bits = 0;           // sum of -log2 p over the gold spans' tokens
  std::uint64_t answer_bytes = 0;   // the bytes those tokens spell
  double answer_bpb = 0;            // answer_bits / answer_bytes
};

struct AxisResult {
  Axis axis = Axis::reasoning_primitives;
  std::int64_t tasks = 0;
  double accuracy = 0, centered = 0;  // means over the axis's tasks
  double answer_bits = 0;
  std::uint64_t answer_bytes = 0;
  double answer_bpb = 0;              // pooled: answer_bits / answer_bytes
};

struct EvalResults {
  std::string bundle;
  std::int64_t max_per_task = 0;
  std::uint64_t seed = 0;
  std::vector<TaskResult> tasks;  // in the bundle's order
  std::vector<AxisResult> axes;   // the axes that have tasks, in task.hpp's order
  double core = 0;                // mean centered accuracy over the tasks
};

// ---- the steps of evaluate(), each usable (and tested) alone ----------------------------------

namespace score_detail {

// The length of the whitespace character (Python's str.isspace) that starts at s[i], or 0.
inline std::size_t space_at(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = b(0);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
  if (c == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;                                     // U+0085, U+00A0
  if (c == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;                                       // U+1680
  if (c == 0xE2 && b(1) == 0x80) {                                                               // U+2000..200A, 2028, 2029, 202F
    const unsigned d = b(2);
    if ((d >= 0x80 && d <= 0x8A) || d == 0xA8 || d == 0xA9 || d == 0xAF) return 3;
  }
  if (c == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;                                       // U+205F
  if (c == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;                                       // U+3000
  return 0;
}

// Uniform in [0, m), m >= 1.
inline std::uint64_t below(SplitMix64& g, std::uint64_t m) {
  return std::min<std::uint64_t>(m - 1, static_cast<std::uint64_t>(g.uniform() * static_cast<double>(m)));
}

// Where a row's problem is: its file in the bundle (dataset_uri, where the task came from one), task and row.
inline std::string row_where(const Task& t, std::int64_t row) {
  return concat("eval: ", t.dataset_uri.empty() ? std::string() : t.dataset_uri + ": ", "task \"", t.label, "\" row ", row + 1);
}

// Where a task's problem is: its file in the bundle (where it came from one) and its label.
inline std::string task_where(const Task& t) {
  return concat("eval: ", t.dataset_uri.empty() ? std::string() : t.dataset_uri + ": ", "task \"", t.label, "\"");
}

// printf into a std::string.
__attribute__((format(printf, 1, 2))) inline std::string printf_string(const char* fmt, ...) {
  va_list a, b;
  va_start(a, fmt);
  va_copy(b, a);
  const int n = std::vsnprintf(nullptr, 0, fmt, a);
  va_end(a);
  std::string s(static_cast<std::size_t>(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(s.data(), s.size(), fmt, b);
  va_end(b);
  s.resize(static_cast<std::size_t>(std::max(n, 0)));
  return s;
}

}  // namespace score_detail

// `s` without leading and trailing whitespace, as Python's str.strip().
inline std::string strip_whitespace(std::string_view s) {
  std::size_t i = 0, j = s.size();
  while (i < j) {
    const std::size_t k = score_detail::space_at(s, i);
    if (k == 0) break;
    i += k;
  }
  while (j > i) {
    std::size_t b = j - 1;  // the start of the last character
    while (b > i && j - b < 3 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    const std::size_t k = score_detail::space_at(s, b);
    if (k == 0 || b + k != j) break;
    j = b;
  }
  return std::string(s.substr(i, j - i));
}

// The rows evaluated of a task of n rows: all of them when max_per_task is 0 or at least n, else
// max_per_task of them drawn by `seed` (in row order).
inline std::vector<std::int64_t> select_rows(std::int64_t n, std::int64_t max_per_task, std::uint64_t seed) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) rows[static_cast<std::size_t>(i)] = i;
  if (max_per_task <= 0 || max_per_task >= n) return rows;
  SplitMix64 g{splitmix64(seed ^ 0x73656c656374ull)};  // a stream apart from the few-shot ones
  for (std::int64_t i = 0; i < max_per_task; ++i)         // partial Fisher-Yates
    std::swap(rows[static_cast<std::size_t>(i)], rows[static_cast<std::size_t>(i + static_cast<std::int64_t>(score_detail::below(g, static_cast<std::uint64_t>(n - i))))]);
  rows.resize(static_cast<std::size_t>(max_per_task));
  std::sort(rows.begin(), rows.end());
  return rows;
}

// The k few-shot rows of row `row` of a task of n rows (k <= n - 1): distinct, never `row`, in
// drawn order, a function of (n, row, k, seed) only.
inline std::vector<std::int64_t> fewshot_rows(std::int64_t n, std::int64_t row, std::int64_t k, std::uint64_t seed) {
  if (k <= 0) return {};
  if (k > n - 1)
    throw std::invalid_argument(concat("eval: ", k, " few-shot examples asked of a task of ", n, " rows (they must be other rows)"));
  SplitMix64 g{splitmix64(seed) ^ splitmix64(0x66657773686f74ull + static_cast<std::uint64_t>(row))};
  std::vector<std::int64_t> out;
  const auto others = static_cast<std::uint64_t>(n - 1);
  if (2 * static_cast<std::uint64_t>(k) >= others) {  // many of few: shuffle the others' list
    std::vector<std::int64_t> all;
    for (std::int64_t i = 0; i < n; ++i)
      if (i != row) all.push_back(i);
    for (std::size_t i = 0; i < static_cast<std::size_t>(k); ++i) std::swap(all[i], all[i + score_detail::below(g, all.size() - i)]);
    all.resize(static_cast<std::size_t>(k));
    return all;
  }
  // Few of many: draw, skipping repeats. Past a few dozen shots the repeats are looked up in a set
  // (the same draws), so k shots cost O(k), not O(k^2): up to context() - 1 of them are allowed.
  std::unordered_set<std::int64_t> taken;
  const bool use_set = k > 64;
  while (out.size() < static_cast<std::size_t>(k)) {
    auto r = static_cast<std::int64_t>(score_detail::below(g, others));
    if (r >= row) ++r;
    const bool fresh = use_set ? taken.insert(r).second : std::find(out.begin(), out.end(), r) == out.end();
    if (fresh) out.push_back(r);
  }
  return out;
}

// The prompts of an item with the given few-shot rows (see the top of the file): one per choice
// (multiple_choice), per option (schema), or {without, with} (language_modeling).
inline std::vector<std::string> render_prompts(const Task& t, const Item& it, std::span<const std::int64_t> shots) {
  const std::string& d = t.continuation_delimiter;
  std::string few;
  for (const std::int64_t s : shots) {
    const Item& ex = t.items.at(static_cast<std::size_t>(s));
    switch (t.type) {
      case TaskType::language_modeling:
        few += strip_whitespace(ex.context);
        few += d;
        few += ex.continuation;
        break;
      case TaskType::multiple_choice:
        few += ex.query;
        few += d;
        few += ex.choices.at(static_cast<std::size_t>(ex.gold));
        break;
      case TaskType::schema:
        few += ex.context_options.at(static_cast<std::size_t>(ex.gold));
        few += d;
        few += ex.continuation;
        break;
    }
    few += t.example_delimiter;
  }
  std::vector<std::string> out;
  switch (t.type) {
    case TaskType::language_modeling: {
      const std::string with_context = concat(few, strip_whitespace(it.context), d);
      out.push_back(strip_whitespace(with_context));
      out.push_back(concat(with_context, it.continuation));
      break;
    }
    case TaskType::multiple_choice:
      for (const std::string& c : it.choices) out.push_back(concat(few, it.query, d, c));
      break;
    case TaskType::schema:
      for (const std::string& o : it.context_options) out.push_back(concat(few, o, d, it.continuation));
      break;
  }
  return out;
}

// An item ready to score: its token sequences (cropped to the context) and the scored span
// [start, end) of each.
struct PreparedItem {
  std::vector<std::vector<std::int32_t>> sequences;
  std::vector<std::int64_t> start, end;
};

// Renders, encodes, finds the spans and crops row `row` of `t` for a scorer of `context` tokens;
// a row that cannot be scored so is a bundle_error naming the task and the row.
inline PreparedItem prepare_item(const Task& t, std::int64_t row, const data::Tokenizer& tok, std::int64_t context,
                                 const EvalOptions& opt = {}) {
  const Item& it = t.items.at(static_cast<std::size_t>(row));
  const std::vector<std::int64_t> shots = fewshot_rows(static_cast<std::int64_t>(t.items.size()), row, t.num_fewshot, opt.seed);
  const std::vector<std::string> prompts = render_prompts(t, it, shots);
  const auto encode = [&](const std::string& s) {
    std::vector<std::int32_t> v = opt.prefix;
    tok.encode(s, v);
    return v;
  };
  const std::string where = score_detail::row_where(t, row);
  PreparedItem p;
  if (t.type == TaskType::language_modeling) {
    const std::vector<std::int32_t> without = encode(prompts[0]);
    std::vector<std::int32_t> with = encode(prompts[1]);
    if (without.size() > with.size() || !std::equal(without.begin(), without.end(), with.begin()))
      throw bundle_error(concat(where, ": the tokens of the prompt without its continuation are not a prefix of the prompt's with it ",
                                "(the tokenizer merges across the boundary); CORE refuses such rows too"));
    p.start.push_back(static_cast<std::int64_t>(without.size()));
    p.end.push_back(static_cast<std::int64_t>(with.size()));
    p.sequences.push_back(std::move(with));
  } else {
    for (const std::string& s : prompts) p.sequences.push_back(encode(s));
    std::size_t shortest = std::numeric_limits<std::size_t>::max();
    for (const auto& s : p.sequences) shortest = std::min(shortest, s.size());
    const auto same_at = [&](auto index) {
      for (const auto& s : p.sequences)
        if (s[index(s)] != p.sequences[0][index(p.sequences[0])]) return false;
      return true;
    };
    std::size_t common = 0;
    if (t.type == TaskType::multiple_choice) {
      while (common < shortest && same_at([&](const auto&) { return common; })) ++common;
      for (const auto& s : p.sequences) {
        p.start.push_back(static_cast<std::int64_t>(common));
        p.end.push_back(static_cast<std::int64_t>(s.size()));
      }
    } else {
      while (common < shortest && same_at([&](const auto& s) { return s.size() - 1 - common; })) ++common;
      for (const auto& s : p.sequences) {
        p.start.push_back(static_cast<std::int64_t>(s.size() - common));
        p.end.push_back(static_cast<std::int64_t>(s.size()));
      }
    }
  }
  for (std::size_t j = 0; j < p.sequences.size(); ++j) {
    const std::string what = t.type == TaskType::language_modeling ? std::string("the continuation")
                             : t.type == TaskType::multiple_choice ? concat("choice ", j)
                                                                    : concat("context option ", j);
    const std::int64_t length = p.end[j] - p.start[j];
    if (length <= 0)
      throw bundle_error(concat(where, ": ", what, " has nothing to score: ",
                                t.type == TaskType::multiple_choice ? "its tokens are all shared with the other choices (does it begin another?)"
                                : t.type == TaskType::schema        ? "the options' prompts end in no common tokens"
                                                                    : "its tokens add nothing to the prompt's"));
    if (p.start[j] == 0)
      throw bundle_error(concat(where, ": nothing comes before the scored span of ", what,
                                " to predict its first token; give a prefix, as CORE puts its BOS (loopscale eval --prefix TEXT, EvalOptions::prefix)"));
    if (length > context - 1)
      throw bundle_error(concat(where, ": the scored span of ", what, " is ", length, " tokens; a scorer context of ", context,
                                " tokens holds at most ", context - 1, " (one token must come before it)"));
    auto& s = p.sequences[j];
    if (static_cast<std::int64_t>(s.size()) > context) {  // crop from the left
      const std::int64_t crop = static_cast<std::int64_t>(s.size()) - context;
      s.erase(s.begin(), s.begin() + crop);
      p.start[j] -= crop;
      p.end[j] -= crop;
    }
  }
  return p;
}

// Whether the task's num_fewshot examples can fit a scorer context of `context` tokens, or what is
// wrong. Every example adds at least one token, so num_fewshot >= context cannot be what was meant:
// cropping would keep only the last examples. And each prompt renders and encodes all of them
// before it is cropped, so such a count made the work grow as rows x num_fewshot (num_fewshot
// 19999 of 20000 rows did not finish); below the context it is at most context - 1 examples a row.
inline std::optional<std::string> fewshot_problem(const Task& t, std::int64_t context) {
  if (t.num_fewshot < context) return std::nullopt;
  return concat(score_detail::task_where(t), ": num_fewshot ", t.num_fewshot, " cannot fit a context of ", context, " tokens (at most ",
                context - 1, " examples)");
}

// The checks evaluate_task and check_scorable share, in this order: the options, the scorer's
// context, and whether the task's few-shot examples can fit it.
inline void check_scoring(const Task& t, std::int64_t context, const EvalOptions& opt) {
  if (opt.max_per_task < 0) throw std::invalid_argument(concat("eval: max_per_task must be 0 (every row) or more, not ", opt.max_per_task));
  if (context < 2) throw std::invalid_argument(concat("eval: the scorer's context is ", context, " tokens; scoring needs at least 2"));
  if (auto p = fewshot_problem(t, context)) throw bundle_error(*p);
}

// The verdict on one item.
struct ItemScore {
  bool correct = false;
  std::int64_t predicted = 0;     // the choice / option picked (0 for language_modeling)
  double gold_bits = 0;           // -log2 p of the gold span's tokens, summed
  std::uint64_t gold_bytes = 0;   // the bytes they spell
  std::vector<double> mean_loss;  // per sequence, nats per token of its span
};

// Judges a prepared item from the scorer's results for its sequences (in order).
inline ItemScore judge_item(const Task& t, const Item& it, const PreparedItem& p, std::span<const SequenceScores> scores,
                            const data::Tokenizer& tok) {
  ItemScore r;
  const auto span_loss = [&](std::size_t j) {  // nats, summed over the span of sequence j
    double sum = 0;
    for (std::int64_t k = p.start[j] - 1; k < p.end[j] - 1; ++k) sum -= scores[j].logp[static_cast<std::size_t>(k)];
    return sum;
  };
  for (std::size_t j = 0; j < p.sequences.size(); ++j)
    r.mean_loss.push_back(span_loss(j) / static_cast<double>(p.end[j] - p.start[j]));
  std::size_t gold = 0;
  if (t.type == TaskType::language_modeling) {
    const auto& s = p.sequences[0];
    r.correct = true;
    for (std::int64_t k = p.start[0] - 1; k < p.end[0] - 1; ++k)
      if (scores[0].argmax[static_cast<std::size_t>(k)] != s[static_cast<std::size_t>(k + 1)]) r.correct = false;
  } else {
    r.predicted = std::min_element(r.mean_loss.begin(), r.mean_loss.end()) - r.mean_loss.begin();  // the first of equals
    gold = static_cast<std::size_t>(it.gold);
    r.correct = r.predicted == it.gold;
  }
  r.gold_bits = span_loss(gold) / std::log(2.0);
  const auto& g = p.sequences[gold];
  r.gold_bytes = tok.text_bytes(std::span(g).subspan(static_cast<std::size_t>(p.start[gold]), static_cast<std::size_t>(p.end[gold] - p.start[gold])));
  return r;
}

// Scores one task (checked with task_problem first).
inline TaskResult evaluate_task(const Task& t, Scorer& scorer, const data::Tokenizer& tok, const EvalOptions& opt = {}) {
  if (auto p = task_problem(t)) throw bundle_error(concat("eval: ", *p));
  if (opt.batch < 1) throw std::invalid_argument(concat("eval: the batch must be at least 1 sequence, not ", opt.batch));
  const std::int64_t context = scorer.context();
  check_scoring(t, context, opt);

  TaskResult res;
  res.label = t.label;
  res.axis = t.axis;
  res.type = t.type;
  res.num_fewshot = t.num_fewshot;
  res.random_baseline = t.random_baseline;

  std::vector<std::pair<std::int64_t, PreparedItem>> pending;
  std::size_t pending_sequences = 0;
  const auto flush = [&] {
    if (pending.empty()) return;
    std::vector<std::vector<std::int32_t>> all;
    all.reserve(pending_sequences);
    for (const auto& [row, p] : pending) all.insert(all.end(), p.sequences.begin(), p.sequences.end());
    const std::vector<SequenceScores> scores = scorer.score(all);
    if (scores.size() != all.size())
      throw std::runtime_error(concat("eval: the scorer returned ", scores.size(), " results for ", all.size(), " sequences"));
    for (std::size_t k = 0; k < all.size(); ++k)
      if (scores[k].logp.size() + 1 != all[k].size() ||
          (t.type == TaskType::language_modeling && scores[k].argmax.size() + 1 != all[k].size()))
        throw std::runtime_error(concat("eval: the scorer returned ", scores[k].logp.size(), " log-probabilities and ", scores[k].argmax.size(),
                                        " argmax for a sequence of ", all[k].size(), " tokens (want one less)"));
    std::size_t at = 0;
    for (const auto& [row, p] : pending) {
      const ItemScore s = judge_item(t, t.items[static_cast<std::size_t>(row)], p, std::span(scores).subspan(at, p.sequences.size()), tok);
      at += p.sequences.size();
      ++res.n;
      res.correct += s.correct ? 1 : 0;
      res.answer_bits += s.gold_bits;
      res.answer_bytes += s.gold_bytes;
    }
    pending.clear();
    pending_sequences = 0;
  };
  for (const std::int64_t row : select_rows(static_cast<std::int64_t>(t.items.size()), opt.max_per_task, opt.seed)) {
    PreparedItem p = prepare_item(t, row, tok, context, opt);
    if (!pending.empty() && pending_sequences + p.sequences.size() > static_cast<std::size_t>(opt.batch)) flush();
    pending_sequences += p.sequences.size();
    pending.emplace_back(row, std::move(p));
    if (pending_sequences >= static_cast<std::size_t>(opt.batch)) flush();
  }
  flush();

  res.accuracy = static_cast<double>(res.correct) / static_cast<double>(res.n);
  res.centered = (res.accuracy - t.random_baseline) / (1.0 - t.random_baseline);
  res.answer_bpb = res.answer_bytes > 0 ? res.answer_bits / static_cast<double>(res.answer_bytes) : std::nan("");
  return res;
}

namespace detail {

// Every task of `b` checked before the first is scored; the results' header.
inline EvalResults start_evaluation(const Bundle& b, const EvalOptions& opt) {
  EvalResults out;
  out.bundle = b.name;
  out.max_per_task = opt.max_per_task;
  out.seed = opt.seed;
  if (b.tasks.empty()) throw bundle_error(concat("eval: bundle \"", b.name, "\" has no tasks"));
  for (const Task& t : b.tasks) {
    if (auto p = task_problem(t)) throw bundle_error(concat("eval: bundle \"", b.name, "\": ", *p));
    for (const Task& u : b.tasks)
      if (&u != &t && u.label == t.label) throw bundle_error(concat("eval: bundle \"", b.name, "\": label \"", t.label, "\" is used twice"));
  }
  return out;
}

// Per axis and the CORE metric, from the tasks' results.
inline void finish_evaluation(EvalResults& out) {
  for (const Axis a : {Axis::parametric_knowledge, Axis::reading_comprehension, Axis::math, Axis::reasoning_primitives, Axis::compositional_symbolic}) {
    AxisResult r;
    r.axis = a;
    for (const TaskResult& t : out.tasks) {
      if (t.axis != a) continue;
      ++r.tasks;
      r.accuracy += t.accuracy;
      r.centered += t.centered;
      r.answer_bits += t.answer_bits;
      r.answer_bytes += t.answer_bytes;
    }
    if (r.tasks == 0) continue;
    r.accuracy /= static_cast<double>(r.tasks);
    r.centered /= static_cast<double>(r.tasks);
    r.answer_bpb = r.answer_bytes > 0 ? r.answer_bits / static_cast<double>(r.answer_bytes) : std::nan("");
    out.axes.push_back(r);
  }
  for (const TaskResult& t : out.tasks) out.core += t.centered;
  out.core /= static_cast<double>(out.tasks.size());
}

}  // namespace detail

// Scores every task of `b` and aggregates per axis (see the top of the file).
inline EvalResults evaluate(const Bundle& b, Scorer& scorer, const data::Tokenizer& tok, const EvalOptions& opt = {}) {
  EvalResults out = detail::start_evaluation(b, opt);
  for (const Task& t : b.tasks) out.tasks.push_back(evaluate_task(t, scorer, tok, opt));
  detail::finish_evaluation(out);
  return out;
}

// evaluate() with the tasks shared among `threads` OpenMP threads, each thread scoring whole tasks
// with a scorer of its own, made on that thread by make_scorer() (returning a
// std::unique_ptr<Scorer>) the first time it needs one. The results come in bundle order and are
// those of evaluate() with such a scorer on one thread: a task is scored whole by one scorer, and
// a host model's scorer called inside the threads' region runs its kernels on its own thread
// (HostBackend::parallel_for and gemm run inline there). Why: a small model's forward shares its
// kernels between threads badly (each parallel region waits for the slowest thread), so scoring
// the 15 probe tasks of a sweep's tiny run took longer on two threads sharing kernels than on one
// (docs/eval.md, "Evaluating on several threads"). A task that throws: the first such task's
// error, in bundle order, after every thread has stopped.
template <class MakeScorer>
EvalResults evaluate_parallel(const Bundle& b, MakeScorer&& make_scorer, const data::Tokenizer& tok, const EvalOptions& opt, int threads) {
  EvalResults out = detail::start_evaluation(b, opt);
  const auto n = static_cast<std::int64_t>(b.tasks.size());
  threads = static_cast<int>(std::clamp<std::int64_t>(threads, 1, n));
  std::vector<TaskResult> results(b.tasks.size());
  std::vector<std::exception_ptr> failed(b.tasks.size());
  std::vector<std::unique_ptr<Scorer>> scorers(static_cast<std::size_t>(threads));
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    try {  // nothing may leave an OpenMP region by an exception
      std::unique_ptr<Scorer>& s = scorers[static_cast<std::size_t>(omp_get_thread_num())];
      if (!s) s = make_scorer();
      results[k] = evaluate_task(b.tasks[k], *s, tok, opt);
    } catch (...) {
      failed[k] = std::current_exception();
    }
  }
  for (const std::exception_ptr& f : failed)
    if (f) std::rethrow_exception(f);
  out.tasks = std::move(results);
  detail::finish_evaluation(out);
  return out;
}

// Throws, before anything is scored, the error evaluate() or evaluate_parallel() with a scorer of
// `context` tokens and these options would meet on a row (the first in bundle order, then row
// order): the bundle's and the tasks' checks, a num_fewshot that cannot fit (fewshot_problem), and
// every row they would select (select_rows) prepared as prepare_item does and discarded, so a span
// too long for the context, an empty span or a tokenizer that merges across the boundary is found
// here. Why: evaluation finds such a row only when it reaches it, after the validation windows and
// the tasks of earlier numbers of recurrences were scored (`loopscale eval --r-eval 1,2,4` spent
// minutes before one bad row failed the command). It costs a rendering and an encoding per row, one
// forward's worth of tokens without the forward, shared among `threads` OpenMP threads.
inline void check_scorable(const Bundle& b, const data::Tokenizer& tok, std::int64_t context, const EvalOptions& opt = {}, int threads = 1) {
  (void)detail::start_evaluation(b, opt);
  for (const Task& t : b.tasks) check_scoring(t, context, opt);
  const auto n = static_cast<std::int64_t>(b.tasks.size());
  threads = static_cast<int>(std::clamp<std::int64_t>(threads, 1, n));
  std::vector<std::exception_ptr> failed(b.tasks.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) {
    const Task& t = b.tasks[static_cast<std::size_t>(i)];
    try {  // nothing may leave an OpenMP region by an exception
      for (const std::int64_t row : select_rows(static_cast<std::int64_t>(t.items.size()), opt.max_per_task, opt.seed))
        (void)prepare_item(t, row, tok, context, opt);
    } catch (...) {
      failed[static_cast<std::size_t>(i)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& f : failed)
    if (f) std::rethrow_exception(f);
}

// ---- output ---------------------------------------------------------------------------------

// The results as JSON, for the `loopscale` program and a sweep's results.jsonl:
//   {"bundle", "seed", "max_per_task", "core",
//    "tasks": [{"label", "axis", "type", "num_fewshot", "n", "correct", "random_baseline",
//               "accuracy", "centered", "answer_bits", "answer_bytes", "answer_bpb"}],
//    "axes": [{"axis", "tasks", "accuracy", "centered", "answer_bits", "answer_bytes", "answer_bpb"}]}
// A number that is not finite (the bpb of no bytes) is null.
inline nlohmann::json to_json(const TaskResult& t) {
  return {{"label", t.label},
          {"axis", std::string(name_of(t.axis))},
          {"type", std::string(name_of(t.type))},
          {"num_fewshot", t.num_fewshot},
          {"n", t.n},
          {"correct", t.correct},
          {"random_baseline", t.random_baseline},
          {"accuracy", t.accuracy},
          {"centered", t.centered},
          {"answer_bits", t.answer_bits},
          {"answer_bytes", t.answer_bytes},
          {"answer_bpb", t.answer_bpb}};
}
inline nlohmann::json to_json(const AxisResult& a) {
  return {{"axis", std::string(name_of(a.axis))}, {"tasks", a.tasks},           {"accuracy", a.accuracy},
          {"centered", a.centered},              {"answer_bits", a.answer_bits}, {"answer_bytes", a.answer_bytes},
          {"answer_bpb", a.answer_bpb}};
}
inline nlohmann::json to_json(const EvalResults& r) {
  nlohmann::json tasks = nlohmann::json::array(), axes = nlohmann::json::array();
  for (const TaskResult& t : r.tasks) tasks.push_back(to_json(t));
  for (const AxisResult& a : r.axes) axes.push_back(to_json(a));
  return {{"bundle", r.bundle}, {"seed", r.seed}, {"max_per_task", r.max_per_task}, {"core", r.core}, {"tasks", tasks}, {"axes", axes}};
}

// A plain-text table: one line per task, one per axis, and the CORE metric.
inline std::string format_table(const EvalResults& r) {
  using score_detail::printf_string;
  int w = 4;
  for (const TaskResult& t : r.tasks) w = std::max(w, static_cast<int>(t.label.size()));
  std::string s = printf_string("%-*s  %-22s  %-17s  %6s  %8s  %8s  %10s\n", w, "task", "axis", "type", "n", "accuracy", "centered", "answer bpb");
  for (const TaskResult& t : r.tasks)
    s += printf_string("%-*s  %-22s  %-17s  %6lld  %8.4f  %8.4f  %10.4f\n", w, t.label.c_str(), std::string(name_of(t.axis)).c_str(),
                std::string(name_of(t.type)).c_str(), static_cast<long long>(t.n), t.accuracy, t.centered, t.answer_bpb);
  s += printf_string("\n%-22s  %5s  %8s  %8s  %10s\n", "axis", "tasks", "accuracy", "centered", "answer bpb");
  for (const AxisResult& a : r.axes)
    s += printf_string("%-22s  %5lld  %8.4f  %8.4f  %10.4f\n", std::string(name_of(a.axis)).c_str(), static_cast<long long>(a.tasks), a.accuracy,
                a.centered, a.answer_bpb);
  s += printf_string("\nCORE (mean centered accuracy over %zu task%s): %.4f\n", r.tasks.size(), r.tasks.size() == 1 ? "" : "s", r.core);
  return s;
}

}  // namespace loopscale::eval
