// The built-in probe suite (eval/probes.hpp): the same seed gives the same bundle; every task has
// its items, every scored prompt (with its few-shot examples) fits in max bytes, golds are in range,
// multiple-choice choices begin with distinct bytes and chance is 1 / choices; every axis has a
// task; every answer is recomputed here from the item's text; the cloze lines come from their
// splits of data/corpus (built here if it is missing, tests/real_corpus.hpp); the training text is
// deterministic, rendered as a prompt shows few-shot examples, and holds no evaluation item.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include "loopscale/data/corpus.hpp"
#include "loopscale/eval/probes.hpp"
#include "real_corpus.hpp"

using namespace loopscale;
using namespace loopscale::eval;
namespace fs = std::filesystem;

namespace {

// scripts/corpus.sh's corpus, built when this checkout has none: the cloze tasks and the
// parametric-knowledge axis are always checked.
fs::path corpus_dir() { return loopscale::test::real_corpus(); }

ProbeOptions options(std::uint64_t seed, bool with_corpus) {
  ProbeOptions o;
  o.seed = seed;
  if (with_corpus) o.corpus = corpus_dir();
  return o;
}

// Reading the corpus takes about half a second: the default bundle is made once.
const Probes& default_probes() {
  static const Probes p = builtin_probes(options(7, true));
  return p;
}

// An item with its gold answer, written out here as CORE renders a few-shot example, so the
// test does not lean on the header's own rendering.
std::string example(const Task& t, const Item& it) {
  if (t.type == TaskType::multiple_choice) return it.query + t.continuation_delimiter + it.choices.at(static_cast<std::size_t>(it.gold));
  return it.context + t.continuation_delimiter + it.continuation;
}

bool same_item(const Item& a, const Item& b) {
  return a.context == b.context && a.query == b.query && a.choices == b.choices && a.context_options == b.context_options &&
         a.continuation == b.continuation && a.gold == b.gold;
}

bool same_task(const Task& a, const Task& b) {
  return a.label == b.label && a.dataset_uri == b.dataset_uri && a.type == b.type && a.axis == b.axis && a.num_fewshot == b.num_fewshot &&
         a.continuation_delimiter == b.continuation_delimiter && a.example_delimiter == b.example_delimiter &&
         a.random_baseline == b.random_baseline && a.items.size() == b.items.size() &&
         std::equal(a.items.begin(), a.items.end(), b.items.begin(), same_item);
}

bool same_bundle(const Bundle& a, const Bundle& b) {
  return a.name == b.name && a.tasks.size() == b.tasks.size() && std::equal(a.tasks.begin(), a.tasks.end(), b.tasks.begin(), same_task);
}

bool contains(const std::string& hay, const std::string& needle) {
  return std::search(hay.begin(), hay.end(), std::boyer_moore_horspool_searcher(needle.begin(), needle.end())) != hay.end();
}

bool blank(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

const std::string& gold_choice(const Item& it) { return it.choices.at(static_cast<std::size_t>(it.gold)); }

// Text between the last `from` (after it) and the `to` after that.
std::string between(const std::string& s, const std::string& from, const std::string& to) {
  const std::size_t a = s.rfind(from);
  REQUIRE(a != std::string::npos);
  const std::size_t b = s.find(to, a + from.size());
  REQUIRE(b != std::string::npos);
  return s.substr(a + from.size(), b - a - from.size());
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<long> numbers_in(const std::string& s) {
  std::vector<long> out;
  for (std::size_t i = 0; i < s.size();) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      out.push_back(std::stol(s.substr(i, j - i)));
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

// ---- each task's answer, recomputed from its text ----------------------------------------------

std::string arithmetic_answer(const Item& it) {
  std::istringstream in(it.context);
  std::string prompt;
  long a = 0, b = 0;
  char op = 0;
  in >> prompt >> a >> op >> b;
  REQUIRE(prompt == ">>>");
  REQUIRE(in);
  return std::to_string(op == '+' ? a + b : op == '-' ? a - b : a * b);
}

std::string word_problem_answer(const Item& it) {
  const std::vector<long> n = numbers_in(it.query);
  REQUIRE(n.size() == 2);
  const std::string& q = it.query;
  if (contains(q, " buys ") || contains(q, " together?")) return std::to_string(n[0] + n[1]);
  if (contains(q, " gives ") || contains(q, " lost ")) return std::to_string(n[0] - n[1]);
  if (contains(q, " bags with ")) return std::to_string(n[0] * n[1]);
  REQUIRE(contains(q, " shares "));
  REQUIRE(n[0] % n[1] == 0);
  return std::to_string(n[0] / n[1]);
}

// "x=3" or "x = 3" lines, then "value of x?"; a value that is a variable is looked up (depth 1).
std::string var_assign_answer(const Item& it, bool code, int depth) {
  std::map<std::string, std::string> value;
  std::vector<std::string> order;
  for (const std::string& l : lines_of(it.context)) {
    const std::size_t eq = l.find(code ? " = " : "=");
    if (eq == std::string::npos || l.size() > 8) continue;
    const std::string name = l.substr(0, eq), v = l.substr(eq + (code ? 3 : 1));
    REQUIRE(value.count(name) == 0);
    value[name] = v;
    order.push_back(name);
  }
  REQUIRE(order.size() == (depth == 0 ? 5u : 10u));
  const std::string asked = between(it.context, "value of ", "?");
  std::string v = value.at(asked);
  if (depth == 1) {
    REQUIRE(std::isalpha(static_cast<unsigned char>(v[0])));
    v = value.at(v);
  }
  REQUIRE(std::isdigit(static_cast<unsigned char>(v[0])));
  return v;
}

std::string induction_answer(const Item& it) {
  const std::vector<std::string> l = lines_of(it.context);
  REQUIRE(l.size() == 9);
  const std::string key = l.back().substr(0, l.back().size() - 3);
  REQUIRE(l.back() == key + " ->");
  for (std::size_t i = 0; i + 1 < l.size(); ++i)
    if (l[i].rfind(key + " -> ", 0) == 0) return l[i].substr(key.size() + 4);
  FAIL("the key " << key << " is not in the list");
  return "";
}

// A repeat's string is the shortest period of the context's letters; the answer continues the
// period. Recomputed without the generator's lengths; the period has no three letters twice (read
// cyclically), so the prompt's last three letters name one place in it.
std::string repeat_answer(const Item& it) {
  REQUIRE(it.context.rfind("Repeat: ", 0) == 0);
  const std::string seen = it.context.substr(8);
  std::size_t period = 1;
  while (period < seen.size() && seen.compare(period, std::string::npos, seen, 0, seen.size() - period) != 0) ++period;
  REQUIRE(period >= 8);
  REQUIRE(period <= 24);
  REQUIRE(seen.size() >= period + 3);
  REQUIRE(seen.size() <= 3 * period);
  std::set<std::string> trigrams;
  for (std::size_t i = 0; i < period; ++i) REQUIRE(trigrams.insert({seen[i], seen[(i + 1) % period], seen[(i + 2) % period]}).second);
  std::string answer;
  for (std::size_t i = seen.size(); i < seen.size() + 4; ++i) answer.push_back(seen[i % period]);
  return answer;
}

std::string p_hop_answer(const Item& it, int p) {
  std::map<char, char> next;
  std::istringstream links(between(it.context, "Links: ", "\n"));
  for (std::string l; links >> l;) {
    REQUIRE(l.size() == 3);
    REQUIRE(l[1] == '>');
    next[l[0]] = l[2];
  }
  REQUIRE(next.size() == 7);
  REQUIRE(std::stoi(between(it.context, "follow ", " links")) == p);
  char at = between(it.context, "Start at ", ",").at(0);
  for (int i = 0; i < p; ++i) at = next.at(at);
  return std::string(1, at);
}

std::string dyck_answer(const Item& it) {
  const std::string opens = "([{<", closes = ")]}>";
  std::string stack;
  for (const char c : between(it.context, "Close: ", "\nAnswer:")) {
    if (opens.find(c) != std::string::npos) {
      stack.push_back(closes[opens.find(c)]);
    } else {
      REQUIRE(!stack.empty());
      REQUIRE(stack.back() == c);
      stack.pop_back();
    }
  }
  REQUIRE(!stack.empty());
  return std::string(stack.rbegin(), stack.rend());
}

std::string string_answer(const Item& it, const std::string& verb) {
  std::string s = between(it.context, verb + ": ", "\nAnswer:");
  REQUIRE(s.size() >= 5);
  REQUIRE(s.size() <= 8);
  if (verb == "Reverse") std::reverse(s.begin(), s.end());
  if (verb == "Sort") std::sort(s.begin(), s.end());
  return s;
}

// The city of the person asked about; the choices are the passage's four cities.
std::string passage_answer(const Item& it) {
  std::map<std::string, std::string> city;
  std::istringstream facts(lines_of(it.query).at(0));
  for (std::string who, lives, in, where; facts >> who >> lives >> in >> where;) {
    REQUIRE(lives == "lives");
    REQUIRE(in == "in");
    REQUIRE(where.back() == '.');
    city[who] = where.substr(0, where.size() - 1);
  }
  REQUIRE(city.size() == 4);
  std::set<std::string> cities, choices(it.choices.begin(), it.choices.end());
  for (const auto& [w, c] : city) cities.insert(c);
  REQUIRE(cities == choices);
  return city.at(between(it.query, "Where does ", " live?"));
}

// The answer each task's item must have (cloze: tested against the corpus below).
std::string expected(const Task& t, const Item& it) {
  const std::string& l = t.label;
  if (l == "arithmetic") return arithmetic_answer(it);
  if (l == "word_problems") return word_problem_answer(it);
  if (l.rfind("var_assign_d", 0) == 0) return var_assign_answer(it, l.ends_with("_code"), l[12] - '0');
  if (l == "induction") return induction_answer(it);
  if (l == "repeat") return repeat_answer(it);
  if (l.rfind("p_hop_", 0) == 0) return p_hop_answer(it, std::stoi(l.substr(6)));
  if (l == "dyck") return dyck_answer(it);
  if (l == "copy") return string_answer(it, "Copy");
  if (l == "reverse") return string_answer(it, "Reverse");
  if (l == "sort") return string_answer(it, "Sort");
  if (l == "passage_recall") return passage_answer(it);
  if (l == "passage_recall_no_passage") {
    REQUIRE(it.query.find("lives in") == std::string::npos);
    REQUIRE(it.query.rfind("Question: Where does ", 0) == 0);
    return gold_choice(it);  // no passage, so nothing to recompute it from: chance by design
  }
  FAIL("no check for the answers of task " << l);
  return "";
}

// A split of data/corpus as text.
std::string split_text(data::Split s) {
  const data::Corpus c = data::open_corpus(corpus_dir(), s);
  std::string text(c.tokens(), '\0');
  std::vector<std::int32_t> buf(1 << 20);
  for (std::uint64_t p = 0; p < c.tokens(); p += buf.size()) {
    const std::uint64_t n = std::min<std::uint64_t>(buf.size(), c.tokens() - p);
    c.read(p, n, buf.data());
    for (std::uint64_t i = 0; i < n; ++i) text[p + i] = static_cast<char>(buf[i]);
  }
  return text;
}

// Which of `needles` occur in `text`, anywhere or (line_starts) at the start of a line: one pass,
// each position looked up by its next k bytes among the needles' first k (k: the shortest
// needle's length). Searching the text once per needle took seconds on the training split.
std::vector<bool> occur(std::string_view text, const std::vector<std::string>& needles, bool line_starts) {
  std::size_t k = std::numeric_limits<std::size_t>::max();
  for (const std::string& n : needles) k = std::min(k, n.size());
  REQUIRE(k > 0);
  std::unordered_multimap<std::string_view, std::size_t> by_head;
  for (std::size_t i = 0; i < needles.size(); ++i) by_head.emplace(std::string_view(needles[i]).substr(0, k), i);
  std::vector<bool> found(needles.size());
  for (std::size_t at = 0; at + k <= text.size(); ++at) {
    if (line_starts && at > 0 && text[at - 1] != '\n') continue;
    const auto [first, last] = by_head.equal_range(text.substr(at, k));
    for (auto it = first; it != last; ++it) found[it->second] = found[it->second] || text.substr(at).starts_with(needles[it->second]);
  }
  return found;
}

// Every task in the bundle has its items; every scored prompt fits: the item with each of its
// choices after the num_fewshot longest other items as examples, each followed by the example
// delimiter (what CORE builds, whichever examples it draws). Contexts and queries have no blank at
// either end (CORE trims them) and answers start with no blank (the delimiter holds it).
void check_shapes(const Probes& p, const ProbeOptions& o) {
  std::set<std::string> labels;
  for (const Task& t : p.bundle.tasks) {
    INFO("task " << t.label << ", max_bytes " << o.max_bytes);
    REQUIRE(labels.insert(t.label).second);
    REQUIRE(static_cast<std::int64_t>(t.items.size()) == o.items_per_task);
    REQUIRE(t.random_baseline >= 0);
    REQUIRE(t.random_baseline < 1);
    REQUIRE(t.num_fewshot >= 0);
    std::vector<std::size_t> order(t.items.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto longer = [&](std::size_t a, std::size_t b) { return example(t, t.items[a]).size() > example(t, t.items[b]).size(); };
    std::sort(order.begin(), order.end(), longer);
    std::set<std::string> distinct;
    for (std::size_t i = 0; i < t.items.size(); ++i) {
      const Item& it = t.items[i];
      INFO("item " << i << ": " << example(t, it));
      REQUIRE(distinct.insert(example(t, it)).second);
      std::string shots;
      for (std::size_t k = 0, used = 0; used < static_cast<std::size_t>(t.num_fewshot); ++k) {
        if (order[k] == i) continue;
        shots += example(t, t.items[order[k]]) + t.example_delimiter;
        ++used;
      }
      const std::string& head = t.type == TaskType::multiple_choice ? it.query : it.context;
      REQUIRE(!head.empty());
      REQUIRE(!blank(head.front()));
      REQUIRE(!blank(head.back()));
      if (t.type == TaskType::multiple_choice) {
        REQUIRE(it.choices.size() >= 2);
        REQUIRE(it.gold >= 0);
        REQUIRE(it.gold < static_cast<std::int64_t>(it.choices.size()));
        REQUIRE(t.random_baseline == Approx(1.0 / static_cast<double>(it.choices.size())));
        std::set<char> first;
        for (const std::string& c : it.choices) {
          REQUIRE(!c.empty());
          REQUIRE(!blank(c.front()));
          REQUIRE(first.insert(c.front()).second);
          REQUIRE(static_cast<std::int64_t>((shots + it.query + t.continuation_delimiter + c).size()) <= o.max_bytes);
        }
      } else {
        REQUIRE(t.type == TaskType::language_modeling);
        REQUIRE(!it.continuation.empty());
        REQUIRE(!blank(it.continuation.front()));
        REQUIRE(static_cast<std::int64_t>((shots + it.context + t.continuation_delimiter + it.continuation).size()) <= o.max_bytes);
      }
    }
  }
  for (const LeftOut& l : p.left_out) {
    REQUIRE(labels.insert(l.label).second);
    REQUIRE(!l.reason.empty());
  }
}

}  // namespace

TEST_CASE("probes: the same seed gives the same bundle, another seed another", "[eval]") {
  ProbeOptions o = options(7, false);
  o.items_per_task = 50;
  const Probes a = builtin_probes(o), b = builtin_probes(o);
  o.seed = 8;
  const Probes c = builtin_probes(o);
  REQUIRE(same_bundle(a.bundle, b.bundle));
  REQUIRE(a.bundle.tasks.size() == c.bundle.tasks.size());
  for (std::size_t i = 0; i < a.bundle.tasks.size(); ++i) {
    INFO(a.bundle.tasks[i].label);
    REQUIRE(!same_task(a.bundle.tasks[i], c.bundle.tasks[i]));
    // A task's items depend on the seed and its own label only: the first 50 of 200 are these.
    const Task& big = default_probes().bundle.tasks.at(default_probes().bundle.tasks.size() - a.bundle.tasks.size() + i);
    REQUIRE(big.label == a.bundle.tasks[i].label);
    REQUIRE(std::equal(a.bundle.tasks[i].items.begin(), a.bundle.tasks[i].items.end(), big.items.begin(), same_item));
  }
  REQUIRE(same_bundle(builtin_probes(options(7, true)).bundle, default_probes().bundle));
}

TEST_CASE("probes: every task has its items, every scored prompt fits in max bytes, golds in range, choices with distinct first bytes", "[eval]") {
  check_shapes(default_probes(), options(7, true));
  // Smaller budgets: the tasks that still fit keep every prompt within them, the others are left
  // out with the reason.
  for (const std::int64_t max_bytes : {128, 64}) {
    ProbeOptions o = options(3, false);
    o.max_bytes = max_bytes;
    o.items_per_task = 40;
    const Probes p = builtin_probes(o);
    check_shapes(p, o);
    REQUIRE(p.bundle.tasks.size() + p.left_out.size() == 18);
    const auto out = std::find_if(p.left_out.begin(), p.left_out.end(), [](const LeftOut& l) { return l.label == "var_assign_d1_code"; });
    REQUIRE(out != p.left_out.end());
    REQUIRE_THAT(out->reason, Catch::Contains("distinct items fit in") && Catch::Contains("max_bytes " + std::to_string(max_bytes)));
  }
}

TEST_CASE("probes: every axis has a task, and without a corpus the cloze tasks are left out with the reason", "[eval]") {
  const Probes without = builtin_probes(options(7, false));
  std::set<Axis> axes;
  for (const Task& t : without.bundle.tasks) axes.insert(t.axis);
  REQUIRE(axes == std::set<Axis>{Axis::reading_comprehension, Axis::math, Axis::reasoning_primitives, Axis::compositional_symbolic});
  REQUIRE(without.bundle.tasks.size() == 16);
  REQUIRE(without.left_out.size() == 2);
  for (const LeftOut& l : without.left_out) {
    REQUIRE((l.label == "cloze_train" || l.label == "cloze_val"));
    REQUIRE_THAT(l.reason, Catch::Contains("no corpus given"));
  }
  for (const Task& t : default_probes().bundle.tasks) axes.insert(t.axis);
  REQUIRE(axes.size() == 5);
  REQUIRE(default_probes().left_out.empty());
}

TEST_CASE("probes: every answer is right, recomputed from the item's text", "[eval]") {
  for (const Task& t : default_probes().bundle.tasks) {
    if (t.label.rfind("cloze_", 0) == 0) continue;  // the next test
    for (const Item& it : t.items) {
      INFO(t.label << ": " << example(t, it));
      const std::string answer = expected(t, it);
      if (t.type == TaskType::multiple_choice) {
        REQUIRE(gold_choice(it) == answer);
        REQUIRE(std::count(it.choices.begin(), it.choices.end(), answer) == 1);
      } else {
        // The answer and its newline (exact match scores the whole answer); a repeat goes on, so
        // its four letters alone.
        REQUIRE(it.continuation == (t.label == "repeat" ? answer : answer + "\n"));
      }
    }
  }
}

TEST_CASE("probes: the cloze lines come from their splits, the validation starts from no training line", "[eval]") {
  const std::string train = split_text(data::Split::train), val = split_text(data::Split::val);
  const auto task = [](const std::string& label) -> const Task& {
    const std::vector<Task>& tasks = default_probes().bundle.tasks;
    const auto t = std::find_if(tasks.begin(), tasks.end(), [&](const Task& x) { return x.label == label; });
    REQUIRE(t != tasks.end());
    return *t;
  };
  const auto lines = [](const Task& t) {
    std::vector<std::string> out;
    for (const Item& it : t.items) out.push_back(it.query + " " + gold_choice(it));
    return out;
  };
  const auto starts = [](const Task& t) {
    std::vector<std::string> out;
    for (const Item& it : t.items) out.push_back(it.query);
    return out;
  };
  const Task& in_train = task("cloze_train");
  const Task& in_val = task("cloze_val");
  const std::vector<bool> train_lines = occur(train, lines(in_train), true), val_lines = occur(val, lines(in_val), true),
                          val_starts_in_train = occur(train, starts(in_val), true);
  for (std::size_t i = 0; i < in_train.items.size(); ++i) {
    INFO(example(in_train, in_train.items[i]));
    REQUIRE(train_lines[i]);
  }
  for (std::size_t i = 0; i < in_val.items.size(); ++i) {
    INFO(example(in_val, in_val.items[i]));
    REQUIRE(val_lines[i]);
    REQUIRE(!val_starts_in_train[i]);
  }
}

// --mix-probes lays the text out in windows of seq_len + 1 bytes, and the trainer starts its windows
// only at their multiples: every window must begin with a document, hold the documents that fit
// whole and in order, and end with the start of the next, which begins the next window.
TEST_CASE("probes: the training text in windows: each begins with a document, whole documents in order, then the next one's start", "[eval]") {
  for (const std::int64_t max_bytes : {std::int64_t{128}, std::int64_t{256}}) {
    ProbeOptions o = options(7, false);
    o.max_bytes = max_bytes;
    std::vector<std::string> docs;
    probe_training_documents(o, [&](const std::string& d) {
      REQUIRE(d.size() <= static_cast<std::size_t>(max_bytes) + 1);
      docs.push_back(d);
      return docs.size() < 3000;
    });
    std::string plain;
    for (const std::string& d : docs) plain += d;
    REQUIRE(probe_training_text(o, plain.size()) == plain);  // without windows: the documents back to back

    const std::size_t window = static_cast<std::size_t>(max_bytes) + 1, size = 100 * window;
    const std::string text = probe_training_text(o, size, window);
    REQUIRE(text.size() == size);
    std::size_t i = 0, tails = 0;
    for (std::size_t at = 0; at < size; at += window) {
      INFO("window at " << at);
      std::size_t used = 0;
      for (; i < docs.size() && used + docs[i].size() <= window; used += docs[i++].size()) REQUIRE(text.compare(at + used, docs[i].size(), docs[i]) == 0);
      REQUIRE(used > 0);  // it began with a whole document
      REQUIRE(i < docs.size());
      REQUIRE(text.compare(at + used, window - used, docs[i], 0, window - used) == 0);
      tails += used < window;
    }
    CHECK(tails > 50);  // most windows end with a cut document, so the cut ones are checked
  }
  CHECK_THROWS_WITH(probe_training_text(options(7, false), 1000, 256), Catch::Contains("cannot hold a document of up to 257"));
}

// --mix-probes-tasks: the text of a few tasks only, each drawn as often as the others; a label that
// is not a task of the text, or whose items do not fit, is refused by name.
TEST_CASE("probes: the training text of chosen tasks holds those tasks only, and a wrong choice is refused naming it", "[eval]") {
  ProbeOptions o = options(7, false);
  o.max_bytes = 128;
  const std::vector<std::string> tasks = {"induction", "var_assign_d0_math"};
  std::size_t lookups = 0, assignments = 0;
  probe_training_documents(o, tasks, [&](const std::string& d) {
    INFO(d);
    const bool lookup = contains(d, " -> "), assignment = contains(d, "What is the numerical value of ");
    REQUIRE(lookup != assignment);
    lookups += lookup;
    assignments += assignment;
    return lookups + assignments < 2000;
  });
  CHECK(lookups > 900);  // uniform over the two: 1,000 each expected, sd about 22
  CHECK(assignments > 900);
  // The windowed text is made of the same documents.
  const std::string text = probe_training_text(o, tasks, 129 * 200, 129);
  REQUIRE(!contains(text, "Copy: "));
  REQUIRE(!contains(text, ">>> "));

  const auto refused = [&](std::vector<std::string> bad) {
    return [o, bad] { probe_training_documents(o, bad, [](const std::string&) { return false; }); };
  };
  CHECK_THROWS_WITH(refused({"induction", "inductoin"})(),
                    Catch::Contains("'inductoin' is not a task of the probes' training text (no such task)") && Catch::Contains("induction, repeat, p_hop_2"));
  CHECK_THROWS_WITH(refused({"passage_recall_no_passage"})(), Catch::Contains("controls and cloze tasks never are"));
  CHECK_THROWS_WITH(refused({"cloze_train"})(), Catch::Contains("'cloze_train' is not a task") && Catch::Contains("cloze tasks never are"));
  CHECK_THROWS_WITH(refused({"var_assign_d0_code"})(), Catch::Contains("var_assign_d0_code has too few items that fit in 128 bytes"));
}

TEST_CASE("probes: the training text written for a run is four times what it mixes in, between 2 MiB and 64 MiB", "[eval]") {
  CHECK(probe_text_bytes(0) == std::size_t{2} << 20);
  CHECK(probe_text_bytes(1e5) == std::size_t{2} << 20);
  CHECK(probe_text_bytes(1e7) == std::size_t{40'000'000});
  CHECK(probe_text_bytes(1e9) == std::size_t{64} << 20);
}

TEST_CASE("probes: the training text is the items rendered as few-shot examples, by seed, without any evaluation item", "[eval]") {
  const ProbeOptions o = options(7, false);
  const std::size_t size = std::size_t{2} << 20;
  const std::string text = probe_training_text(o, size);
  REQUIRE(text.size() == size);
  REQUIRE(probe_training_text(o, 5000) == text.substr(0, 5000));
  REQUIRE(probe_training_text(options(8, false), 5000) != text.substr(0, 5000));
  REQUIRE(probe_training_text(7, 5000) == text.substr(0, 5000));

  const Probes eval = builtin_probes(o);
  // What only the items of each task in the text contain.
  const std::map<std::string, std::string> marker = {
      {"passage_recall", "lives in"},
      {"arithmetic", ">>> "},
      {"word_problems", "Question: Ann "},
      {"var_assign_d0_math", "1\nWhat is the numerical value of "},
      {"var_assign_d1_math", "\nb=a\n"},
      {"var_assign_d0_code", "1\n\nQuestion:\nWhat is the value of "},
      {"var_assign_d1_code", "\nb = a\n"},
      {"induction", " -> "},
      {"repeat", "Repeat: "},
      {"p_hop_2", "follow 2 links:"},
      {"p_hop_3", "follow 3 links:"},
      {"dyck", "Close: "},
      {"copy", "Copy: "},
      {"reverse", "Reverse: "},
      {"sort", "Sort: "}};
  // Every task but the control is in the text, and none of their evaluation items is.
  std::vector<std::string> items;
  for (const Task& t : eval.bundle.tasks) {
    INFO(t.label);
    if (t.label == "passage_recall_no_passage") continue;  // never in the text (below)
    REQUIRE(contains(text, marker.at(t.label)));
    for (const Item& it : t.items) items.push_back(example(t, it));
  }
  REQUIRE(items.size() == 15 * 200);
  const std::vector<bool> found = occur(text, items, false);
  for (std::size_t i = 0; i < items.size(); ++i) {
    INFO(items[i]);
    REQUIRE(!found[i]);
  }
  // The control's questions appear only after a passage.
  std::size_t questions = 0;
  for (std::size_t at = text.find("Question: Where does"); at != std::string::npos; at = text.find("Question: Where does", at + 1), ++questions) {
    REQUIRE(at >= 2);
    REQUIRE(text.compare(at - 2, 2, ".\n") == 0);
  }
  REQUIRE(questions > 100);
  // A session's lines are rendered as the items' context, delimiter, continuation: each value right.
  std::size_t sums = 0;
  for (std::size_t at = text.find("\n>>> "); at != std::string::npos && at + 1 < size - 40; at = text.find("\n>>> ", at + 1), ++sums) {
    const std::size_t end = text.find('\n', text.find('\n', at + 1) + 1);
    Item it;
    it.context = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    INFO(text.substr(at + 1, end - at - 1));
    REQUIRE(text.substr(at + 2 + it.context.size(), end - at - 2 - it.context.size()) == arithmetic_answer(it));
  }
  REQUIRE(sums > 1000);
  // So are the symbolic tasks' items: "VERB: input\nAnswer: output".
  std::size_t symbolic = 0;
  for (const std::string verb : {"Copy", "Reverse", "Sort", "Close"}) {
    const std::string head = "\n" + verb + ": ";
    for (std::size_t at = text.find(head); at != std::string::npos && at + 100 < size; at = text.find(head, at + 1), ++symbolic) {
      const std::size_t answer = text.find("\nAnswer: ", at) + 9, end = text.find('\n', answer);
      Item it;
      it.context = text.substr(at + 1, answer - 1 - (at + 1));
      INFO(text.substr(at + 1, end - at - 1));
      REQUIRE(text.substr(answer, end - answer) == (verb == "Close" ? dyck_answer(it) : string_answer(it, verb)));
    }
  }
  REQUIRE(symbolic > 4000);
}

TEST_CASE("probes: a corpus with too few lines, or not byte-level, leaves the cloze tasks out, saying why", "[eval]") {
  const fs::path dir = fs::temp_directory_path() / ("loopscale_probes_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string text = "one two three four five six seven eight nine\nten eleven twelve thirteen fourteen fifteen sixteen seventeen\n";
  const std::vector<std::int32_t> bytes(text.begin(), text.end());
  data::write_token_file((dir / "train.bin").string(), bytes, 256);
  data::write_token_file((dir / "val.bin").string(), bytes, 256);
  ProbeOptions o;
  o.items_per_task = 20;
  o.corpus = dir;
  const Probes p = builtin_probes(o);
  REQUIRE(p.left_out.size() == 2);
  for (const LeftOut& l : p.left_out) {
    REQUIRE((l.label == "cloze_train" || l.label == "cloze_val"));
    REQUIRE_THAT(l.reason, Catch::Contains("of 20 distinct items fit in 256 bytes"));
  }
  REQUIRE(p.bundle.tasks.size() == 16);

  const std::vector<std::int32_t> subword = {1, 299, 7, 10};
  data::write_token_file((dir / "train.bin").string(), subword, 300, 2);
  data::write_token_file((dir / "val.bin").string(), subword, 300, 2);
  // Another tokenizer's tokens: the cloze tasks are left out and the rest is scored (`loopscale
  // eval` on such a run failed when this was an error); the reason names the corpus.
  const Probes q = builtin_probes(o);
  REQUIRE(q.left_out.size() == 2);
  for (const LeftOut& l : q.left_out) REQUIRE_THAT(l.reason, Catch::Contains("byte-level corpus") && Catch::Contains(dir.string()));
  REQUIRE(q.bundle.tasks.size() == 16);
  fs::remove_all(dir);
}

TEST_CASE("probes: options out of range, more than max_probe_items items and a missing corpus are errors", "[eval]") {
  ProbeOptions o;
  o.items_per_task = 1;
  REQUIRE_THROWS_WITH(builtin_probes(o), Catch::Contains("at least 2 items per task"));
  o = ProbeOptions{};
  o.items_per_task = 100000000000;  // generation is linear in the count: this ran for ever
  REQUIRE_THROWS_WITH(builtin_probes(o), Catch::Contains("at most 100000 items per task") && Catch::Contains("not 100000000000"));
  o.items_per_task = max_probe_items + 1;
  REQUIRE_THROWS_WITH(builtin_probes(o), Catch::Contains("at most 100000 items per task"));
  o = ProbeOptions{};
  o.max_bytes = 0;
  REQUIRE_THROWS_WITH(builtin_probes(o), Catch::Contains("positive max_bytes"));
  o = ProbeOptions{};
  o.corpus = fs::path(LOOPSCALE_TEST_DATA) / "no_such_corpus";
  REQUIRE_THROWS_AS(builtin_probes(o), data::corpus_error);
}
