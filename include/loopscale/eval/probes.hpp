// The built-in probe suite: a task bundle (task.hpp) for byte-level models, generated from a seed
// with nothing downloaded, with tasks on each of the iso-depth paper's five downstream axes, sized
// for the small models this library trains (every scored prompt, few-shot example included, fits
// in ProbeOptions::max_bytes, 256 by default).
//
//   axis                    label                       type  shots  chance  needs
//   parametric_knowledge    cloze_train                 MC    0      1/4     corpus
//                           cloze_val (control)         MC    0      1/4     corpus
//   reading_comprehension   passage_recall              MC    0      1/4
//                           passage_recall_no_passage   MC    0      1/4     (control)
//   math                    arithmetic                  LM    1      0
//                           word_problems               MC    0      1/4
//   reasoning_primitives    var_assign_d0_math          LM    0      1/5
//                           var_assign_d0_code          LM    0      1/5
//                           var_assign_d1_math          LM    0      1/5
//                           var_assign_d1_code          LM    0      1/5
//                           induction                   LM    0      1/8
//                           repeat                      LM    0      0
//                           p_hop_2, p_hop_3            LM    1      1/8
//   compositional_symbolic  dyck                        LM    1      0
//                           copy, reverse, sort         LM    1      0
//
// Why each is built as it is:
// - cloze_train gives the start of a line of the corpus's training split and asks for its next
//   three words among four choices, the others three consecutive words of other lines of the same
//   split; cloze_val does the same with validation lines whose start begins no training line. A
//   model that has memorised its training text scores higher on the first; the gap between the
//   two is memorisation, not general skill. Lines are printable ASCII of at least eight words, the
//   start is 5 to 12 words, and every line of the split that begins with it continues with the
//   gold words, so the answer is determined by the text the model saw.
// - passage_recall states four "NAME lives in CITY." facts and asks where one of them lives; the
//   no-passage control asks the same question with the same choices but no passage, so it stays at
//   chance and the difference is what was read from the context.
// - arithmetic is written as the corpus writes it, a Python session (the Python tutorial's
//   ">>> 2 + 2" then "4" on the next line; the corpus indents these blocks, CORE trims a context's
//   leading blanks, so the items are not indented): ">>> 23 + 58" and "81". word_problems are
//   one-step stories ("Question: ...\nAnswer:"), their distractors the other operations on the same
//   numbers and near misses.
// - var_assign_* are the paper's reasoning primitives (Saunshi et al. 2024, appendix B, as the
//   iso-depth paper's code writes them: dev/eval_bundles/saunshi/prepare_saunshi_bundle.py of
//   kschwethelm/looped-lm-scaling): five variables with values 1..25, depth 1 adds five aliases of
//   them, a math form ("n=22") and a code form ("n = 22"), chance 1/5 (a guess among the five
//   values shown). The paper scores them 5-shot; an item of the depth-1 code form alone is up to
//   235 bytes, so here they are 0-shot (their headers say what is asked).
// - induction is the paper's code's induction-head task (dev/eval_bundles/owned): eight lines
//   "key -> val" (keys of four letters, values of three), then a key and "->"; 0-shot.
// - repeat is induction as Olsson et al. (2022, "In-context learning and induction heads") measure
//   it, on repeated random letters: a string of 8 to 24 letters written again and again, cut off
//   between 3 letters and two whole repeats past its first end; the answer is the next four letters.
//   Where the prompt stops varies, so only finding its last letters earlier and copying what followed
//   them answers it (an induction head), not a fixed offset from a marker as in copy. The string has
//   no three letters twice (read cyclically), so the last three name one place: one reading. It
//   repeats more than once because the training text is the items: one repeat per item left a d 64
//   model at 0 after 6M tokens at 90% where this form is learned (docs/eval.md). It is the lookup
//   without the key: a model with no induction head scores 0 here, one that has it but cannot match a
//   key scores here and not on induction. Its answer is the four letters without a newline (the one
//   language-modelling task so): the string goes on, nothing there says to stop.
// - p_hop_P gives the seven links of a chain through eight letters in shuffled order and asks
//   where P links from a start lead: P steps of pointer chasing in one forward pass.
// - dyck closes a bracket sequence over ()[]{}<> ("Close: ([{}<(\nAnswer:", " )>])\n"); copy,
//   reverse and sort act on a string of 5 to 8 lower-case letters, in the same form. The answer
//   comes after a fixed "Answer:": were it to follow the sequence directly, a rendered item would
//   be the start of every longer item that begins with it, and the training text would show
//   evaluation items verbatim inside other items.
//
// Scoring is eval/score.hpp's (CORE's rules): multiple choice by the lowest mean loss over the
// span where the choices differ, language modelling by greedy exact match. A language-modelling
// item's continuation is its answer and the newline after it (repeat's excepted), so exact match
// needs the whole answer (a model that would write `16` after a gold `1` is wrong) and the answer
// bits per byte count that newline; the few-shot examples of those tasks are therefore separated
// by one more newline (a blank line), the arithmetic sessions by none, as a Python session writes
// them. Every multiple-choice item's choices begin with distinct bytes, so for a byte-level model
// they differ from their first byte on and the choice is decided there as well as by the mean
// loss. A language-modelling task's chance is a uniform guess among the candidates its context
// shows (0 where it shows none).
//
// Determinism: every task draws from its own SplitMix64 stream, keyed by the seed, the task's label
// and the purpose (evaluation items, or the training text below), so a bundle depends only on the
// options, adding a task changes no other task's items, and the training text never replays the
// evaluation items' draws. Items within a task are distinct.
//
// probe_training_text: probe items for mixing into training data (a later --mix-probes), rendered
// exactly as a scored prompt shows them. It draws from the training stream, not the evaluation
// one, and also leaves out every item that is an evaluation item of the same options, so no test
// item is trained on verbatim (tested on a 2 MB sample: no evaluation item's text occurs in it).
// The second rule is needed where a task has few items: in a 2 MB sample of seed 7's training
// stream alone, 58 of the 200 arithmetic items, 24 of the 200 dyck items and 1 of the 200 word
// problems occurred, none of the other tasks' items.
// Controls and the cloze tasks are never in it: the first would teach answering without the
// passage, the second would put validation lines into training (and training lines add nothing).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "loopscale/data/corpus.hpp"
#include "loopscale/eval/score.hpp"
#include "loopscale/eval/task.hpp"
#include "loopscale/util/random.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::eval {

// The most items per task the probes make. Generating them is linear in the count (200,000 took
// 22 s and 1.5 GB), so without a bound `eval --items 100000000000` ran for ever; 100,000 is far
// more than a task's accuracy needs (its standard error is below 0.2% there). The one limit of
// ProbeOptions::items_per_task, `eval --items` and `sweep run --eval-items`.
inline constexpr std::int64_t max_probe_items = 100000;

struct ProbeOptions {
  std::uint64_t seed = 0;
  std::int64_t items_per_task = 200;  // 2 (a 1-shot item needs another as its example) to max_probe_items
  std::int64_t max_bytes = 256;       // of every scored prompt, few-shot examples included
  // A byte-level corpus folder (scripts/corpus.sh writes data/corpus): the cloze tasks draw their
  // lines from its train and val splits. Empty: the cloze tasks are left out.
  std::filesystem::path corpus;
};

// A task the options could not make, and why.
struct LeftOut {
  std::string label;
  std::string reason;
};

struct Probes {
  Bundle bundle;
  std::vector<LeftOut> left_out;
};

// An item with its gold answer, as a scored prompt shows it as a few-shot example (and as the
// training text shows it): eval/score.hpp's rendering of the item alone with its gold choice (or
// option, or continuation).
inline std::string render_gold(const Task& t, const Item& it) {
  std::vector<std::string> p = render_prompts(t, it, {});
  return std::move(p.at(t.type == TaskType::language_modeling ? 1 : static_cast<std::size_t>(it.gold)));
}

// The longest prompt the item makes on its own (with its longest choice or context option).
inline std::size_t longest_rendering(const Task& t, const Item& it) {
  std::size_t n = 0;
  for (const std::string& p : render_prompts(t, it, {})) n = std::max(n, p.size());
  return n;
}

namespace probes_detail {

inline constexpr std::size_t mc_choices = 4;    // every multiple-choice task's: chance 1/4
inline constexpr std::size_t var_count = 5;     // the paper's variables per item: chance 1/5
inline constexpr std::size_t induction_pairs = 8;
inline constexpr std::size_t hop_nodes = 8;
inline constexpr std::int64_t repeat_min = 8, repeat_max = 24;  // letters of a repeat item's string
inline constexpr std::int64_t repeat_resume = 3;                 // letters of the first repeat the prompt shows, at least
inline constexpr std::size_t repeat_answer = 4;                   // letters asked for
inline constexpr std::int64_t draws_per_item = 1000;  // before a task is reported as unable to fill

// Which of a seed's streams a draw belongs to.
enum class Stream : std::uint64_t { evaluation = 1, training = 2 };

constexpr std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

struct Rng {
  SplitMix64 g;
  // Uniform below n, but for the modulo's bias of at most n / 2^64 (n < 2^24 here).
  std::uint64_t below(std::uint64_t n) { return g.next() % n; }
  std::int64_t between(std::int64_t lo, std::int64_t hi) { return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo + 1))); }
  template <class C>
  const auto& pick(const C& c) { return c[below(std::size(c))]; }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }
  std::string letters(std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + below(26)));
    return s;
  }
  // n distinct lower-case letters in random order.
  std::vector<char> distinct_letters(std::size_t n) {
    std::vector<char> a(26);
    std::iota(a.begin(), a.end(), 'a');
    shuffle(a);
    a.resize(n);
    return a;
  }
};

inline Rng rng_for(std::uint64_t seed, std::string_view label, Stream s) {
  return Rng{SplitMix64{splitmix64(splitmix64(seed ^ fnv1a(label)) ^ static_cast<std::uint64_t>(s))}};
}

// A multiple-choice item whose gold choice is choices[0], the choices shuffled.
inline Item multiple_choice(std::string query, const std::vector<std::string>& choices, Rng& r) {
  std::vector<std::size_t> order(choices.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  r.shuffle(order);
  Item it;
  it.query = std::move(query);
  for (std::size_t i = 0; i < order.size(); ++i) {
    it.choices.push_back(choices[order[i]]);
    if (order[i] == 0) it.gold = static_cast<std::int64_t>(i);
  }
  return it;
}

// The continuation ends with the answer's newline: exact match then scores the whole answer, so a
// gold `1` is not counted right for a model that would go on to write `16` (the training text
// already ended each answer there).
inline Item language_modeling(std::string context, std::string continuation) {
  Item it;
  it.context = std::move(context);
  it.continuation = std::move(continuation) + '\n';
  return it;
}

// Whether c may join the choices: non-empty and its first byte unlike theirs.
inline bool first_byte_free(const std::vector<std::string>& choices, const std::string& c) {
  return !c.empty() && std::none_of(choices.begin(), choices.end(), [&](const std::string& x) { return x.front() == c.front(); });
}

// ---- the corpus: lines of a split -------------------------------------------------------------

inline std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> w;
  for (std::size_t p = 0; p <= line.size();) {
    const std::size_t q = std::min(line.find(' ', p), line.size());
    w.push_back(line.substr(p, q - p));
    p = q + 1;
  }
  return w;
}

inline std::string join(const std::vector<std::string_view>& w, std::size_t from, std::size_t to) {
  std::string s;
  for (std::size_t i = from; i < to; ++i) {
    if (i > from) s.push_back(' ');
    s.append(w[i]);
  }
  return s;
}

inline constexpr std::size_t cloze_min_words = 8;  // a start of 5 or more, then the 3 asked for
inline constexpr std::size_t cloze_answer_words = 3;

// The key under which a line is found by any text of at least five words it begins with: a hash
// of its first four words and the blank after them (nullopt for fewer words). A line that begins
// with such a text has the same four words, so the lines to compare are those of the same key.
inline std::optional<std::size_t> start_key(std::string_view s) {
  std::size_t at = 0;
  for (int blanks = 0; blanks < 4; ++blanks, ++at)
    if ((at = s.find(' ', at)) == std::string_view::npos) return std::nullopt;
  return std::hash<std::string_view>{}(s.substr(0, at));
}

// A split's text and its lines. Views into `text`: made in place and never moved (held by pointer).
// Which lines begin with an item's start (at least five words) is a lookup in the index by
// start_key: sorting the lines themselves instead took 0.9 s of the 1.0 s that reading
// scripts/corpus.sh's training split took (two busy cores); with the index reading takes 0.35 s.
struct Lines {
  std::string text;
  std::vector<std::string_view> eligible;                            // printable ASCII, no leading or doubled blank, >= 8 words
  std::vector<std::pair<std::size_t, std::string_view>> by_start;  // lines of 5+ words by start_key, sorted by it

  // Calls f on every line that begins with s (of at least five words) until f returns false;
  // false when f did.
  template <class F>
  bool each_line_beginning(std::string_view s, F&& f) const {
    const std::optional<std::size_t> key = start_key(s);
    if (!key) throw std::logic_error("eval: probes look up lines by starts of at least five words");
    const auto first = std::lower_bound(by_start.begin(), by_start.end(), *key, [](const auto& e, std::size_t k) { return e.first < k; });
    for (auto it = first; it != by_start.end() && it->first == *key; ++it)
      if (it->second.starts_with(s) && !f(it->second)) return false;
    return true;
  }
  bool begins_a_line(std::string_view s) const {
    return !each_line_beginning(s, [](std::string_view) { return false; });
  }
  // Whether every line that begins with `start` then a blank continues with the words `next`.
  bool continues_only_with(std::string_view start, std::string_view next) const {
    const std::string prefix = concat(start, ' ');
    return each_line_beginning(prefix, [&](std::string_view line) {
      const std::string_view rest = line.substr(prefix.size());
      return rest.starts_with(next) && (rest.size() == next.size() || rest[next.size()] == ' ');
    });
  }
};

inline bool eligible_line(std::string_view line) {
  if (line.empty() || line.front() == ' ' || line.back() == ' ' || line.find("  ") != std::string_view::npos) return false;
  if (!std::all_of(line.begin(), line.end(), [](char c) { return c >= 0x20 && c <= 0x7e; })) return false;
  return static_cast<std::size_t>(std::count(line.begin(), line.end(), ' ')) + 1 >= cloze_min_words;
}

inline std::shared_ptr<const Lines> read_lines(const data::Corpus& c) {
  auto l = std::make_shared<Lines>();
  l->text.resize(c.tokens());
  std::vector<std::int32_t> buf(std::size_t{1} << 20);
  for (std::uint64_t p = 0; p < c.tokens(); p += buf.size()) {
    const std::uint64_t n = std::min<std::uint64_t>(buf.size(), c.tokens() - p);
    c.read(p, n, buf.data());
    std::transform(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n), l->text.begin() + static_cast<std::ptrdiff_t>(p),
                   [](std::int32_t t) { return static_cast<char>(static_cast<unsigned char>(t)); });
  }
  const std::string_view text = l->text;
  for (std::size_t p = 0; p < text.size();) {
    const std::size_t q = std::min(text.find('\n', p), text.size());
    const std::string_view line = text.substr(p, q - p);
    if (const std::optional<std::size_t> key = start_key(line)) l->by_start.emplace_back(*key, line);
    if (eligible_line(line)) l->eligible.push_back(line);
    p = q + 1;
  }
  std::sort(l->by_start.begin(), l->by_start.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return l;
}

// Why the cloze tasks cannot read `dir`, or "" when they can: their lines are a byte-level corpus's
// text (another tokenizer's tokens would first have to be decoded, and a packed corpus's rows are
// cut documents).
inline std::string not_byte_level(const std::filesystem::path& dir) {
  const nlohmann::json tok = data::tokenizer_record(dir, data::open_corpus(dir, data::Split::train, data::Verify::headers));
  if (tok.value("kind", "") == "byte") return "";
  return concat("the cloze lines come from a byte-level corpus (scripts/corpus.sh); ", dir.string(), " has the tokenizer ", tok.dump());
}

// The train and val lines of a byte-level corpus folder (not_byte_level says whether it is one).
inline std::pair<std::shared_ptr<const Lines>, std::shared_ptr<const Lines>> read_corpus(const std::filesystem::path& dir) {
  return {read_lines(data::open_corpus(dir, data::Split::train)), read_lines(data::open_corpus(dir, data::Split::val))};
}

// A cloze item on a line of `split`; `unseen_in`, when given, must begin no line with the item's
// start (the validation control against the training split).
inline std::optional<Item> cloze(const Lines& split, const Lines* unseen_in, Rng& r) {
  if (split.eligible.size() < 2) return std::nullopt;
  const std::string_view line = r.pick(split.eligible);
  const std::vector<std::string_view> w = words(line);
  const std::size_t cut = static_cast<std::size_t>(r.between(5, static_cast<std::int64_t>(std::min<std::size_t>(w.size() - cloze_answer_words, 12))));
  std::string start = join(w, 0, cut);
  const std::string gold = join(w, cut, cut + cloze_answer_words);
  if (!split.continues_only_with(start, gold) || (unseen_in && unseen_in->begins_a_line(start))) return std::nullopt;
  std::vector<std::string> choices{gold};
  for (int tries = 0; choices.size() < mc_choices && tries < 200; ++tries) {
    const std::string_view other = r.pick(split.eligible);
    if (other.data() == line.data()) continue;
    const std::vector<std::string_view> w2 = words(other);
    const std::size_t p = r.below(w2.size() - cloze_answer_words + 1);
    std::string d = join(w2, p, p + cloze_answer_words);
    // A distractor that truly follows this start somewhere in the split would be a second answer.
    if (first_byte_free(choices, d) && !split.begins_a_line(concat(start, ' ', d))) choices.push_back(std::move(d));
  }
  if (choices.size() < mc_choices) return std::nullopt;
  return multiple_choice(std::move(start), choices, r);
}

// ---- the corpus-free tasks --------------------------------------------------------------------

inline constexpr std::string_view names[] = {"Ann", "Ben", "Cora", "Dan", "Eve", "Finn", "Gail", "Hugo", "Iris",
                                                           "Jack", "Kate", "Leo", "Mia", "Ned", "Olga", "Paul", "Quinn", "Rosa",
                                                           "Sam", "Tess", "Uma", "Vic", "Wes", "Xena", "Yuri", "Zoe"};
inline constexpr std::string_view cities[] = {
    "Athens", "Accra",  "Berlin", "Baku",   "Cairo",  "Delhi",   "Dublin", "Geneva", "Hanoi", "Havana",
    "Istanbul", "Jakarta", "Kyiv", "Lima",  "Lagos",  "London",  "Madrid", "Manila", "Nairobi", "Oslo",
    "Ottawa", "Paris",  "Prague", "Quito",  "Rome",   "Riga",    "Seoul",  "Sofia",  "Tokyo",  "Tunis",
    "Vienna", "Vilnius", "Warsaw", "Yerevan", "Zagreb", "Zurich", "Bern",   "Dakar",  "Kabul",  "Minsk"};
inline constexpr std::string_view things[] = {"apples", "pens", "coins", "books", "cards",
                                                            "eggs", "stamps", "shells", "marbles", "sweets"};

// Four "NAME lives in CITY." facts (the cities' first bytes distinct, so they serve as choices) and
// a question on one; the control leaves the facts out.
inline Item passage_recall(Rng& r, bool with_passage) {
  std::vector<std::string_view> who(std::begin(names), std::end(names));
  r.shuffle(who);
  std::vector<std::string> where;
  while (where.size() < mc_choices) {
    const std::string c(r.pick(cities));
    if (first_byte_free(where, c)) where.push_back(c);
  }
  const std::size_t q = r.below(mc_choices);
  std::string query;
  if (with_passage) {
    for (std::size_t i = 0; i < mc_choices; ++i) query += concat(i > 0 ? " " : "", who[i], " lives in ", where[i], '.');
    query += '\n';
  }
  query += concat("Question: Where does ", who[q], " live?\nAnswer:");
  std::swap(where[0], where[q]);  // the gold first
  return multiple_choice(std::move(query), where, r);
}

// ">>> a + b" then the value, as a Python session prints it.
inline Item arithmetic(Rng& r) {
  const std::int64_t op = r.between(0, 2);
  const std::int64_t a = r.between(0, 99);
  const std::int64_t b = op == 0 ? r.between(0, 99) : op == 1 ? r.between(0, a) : r.between(0, 9);
  const std::int64_t v = op == 0 ? a + b : op == 1 ? a - b : a * b;
  return language_modeling(concat(">>> ", a, op == 0 ? " + " : op == 1 ? " - " : " * ", b), std::to_string(v));
}

// A one-step story; distractors are the other operations on its two numbers, the numbers
// themselves and near misses, then any number, each with a first byte unlike the others'.
inline Item word_problem(Rng& r) {
  std::vector<std::string_view> who(std::begin(names), std::end(names));
  r.shuffle(who);
  const std::string_view a = who[0], b = who[1], t = r.pick(things);
  const std::int64_t kind = r.between(0, 5);
  std::int64_t x = 0, y = 0, answer = 0;
  std::string story;
  switch (kind) {
    case 0:
      x = r.between(2, 50), y = r.between(2, 50), answer = x + y;
      story = concat(a, " has ", x, ' ', t, ". ", a, " buys ", y, " more. How many ", t, " does ", a, " have now?");
      break;
    case 1:
      x = r.between(10, 99), y = r.between(1, x - 1), answer = x - y;
      story = concat(a, " has ", x, ' ', t, " and gives ", y, " of them to ", b, ". How many ", t, " does ", a, " have left?");
      break;
    case 2:
      x = r.between(2, 9), y = r.between(2, 12), answer = x * y;
      story = concat(a, " has ", x, " bags with ", y, ' ', t, " in each bag. How many ", t, " are in the bags?");
      break;
    case 3:
      x = r.between(2, 9), answer = r.between(2, 12), y = x * answer;
      story = concat(a, " shares ", y, ' ', t, " equally among ", x, " friends. How many ", t, " does each friend get?");
      break;
    case 4:
      x = r.between(2, 50), y = r.between(2, 50), answer = x + y;
      story = concat(a, " has ", x, ' ', t, " and ", b, " has ", y, ' ', t, ". How many ", t, " do they have together?");
      break;
    default:
      x = r.between(10, 99), y = r.between(1, x - 1), answer = x - y;
      story = concat(a, " had ", x, ' ', t, " and lost ", y, " of them. How many ", t, " are left?");
      break;
  }
  std::vector<std::string> choices{std::to_string(answer)};
  const std::int64_t near[] = {x + y, x - y, x * y, x, y, answer + 1, answer - 1, answer + 10, answer - 10, answer + 2};
  for (const std::int64_t v : near)
    if (v >= 0 && choices.size() < mc_choices && first_byte_free(choices, std::to_string(v))) choices.push_back(std::to_string(v));
  while (choices.size() < mc_choices) {
    const std::string v = std::to_string(r.between(1, 2 * answer + 20));
    if (first_byte_free(choices, v)) choices.push_back(v);
  }
  return multiple_choice(concat("Question: ", story, "\nAnswer:"), choices, r);
}

// The paper's variable assignment (see the top of this file): depth 0 asks for a variable given a
// value, depth 1 for an alias of one; bases are listed first, then the aliases.
inline Item var_assign(Rng& r, int depth, bool code) {
  const std::vector<char> v = r.distinct_letters(depth == 0 ? var_count : 2 * var_count);
  std::vector<std::string> value(var_count), lines;
  for (std::size_t i = 0; i < var_count; ++i) {
    value[i] = std::to_string(r.between(1, 25));
    lines.push_back(concat(v[i], code ? " = " : "=", value[i]));
  }
  const std::size_t q = r.below(var_count);
  char asked = v[q];
  std::string answer = value[q];
  if (depth == 1) {
    std::vector<std::size_t> base(var_count);  // alias i names base[i]: one to one
    std::iota(base.begin(), base.end(), std::size_t{0});
    r.shuffle(base);
    for (std::size_t i = 0; i < var_count; ++i) lines.push_back(concat(v[var_count + i], code ? " = " : "=", v[base[i]]));
    asked = v[var_count + q];
    answer = value[base[q]];
  }
  std::string body;
  for (const std::string& l : lines) body += concat(body.empty() ? "" : "\n", l);
  if (code)
    return language_modeling(concat("The following is a very short Python program. "
                                    "Use the program to resolve the value of the variable in the question.\nProgram:\n",
                                    body, "\n\nQuestion:\nWhat is the value of ", asked, "?\nAnswer:"),
                             answer);
  return language_modeling(
      concat("The following is a set of simple mathematical equations.\n\n", body, "\nWhat is the numerical value of ", asked, "?\nAnswer:"), answer);
}

// Eight "key -> val" lines, then a key and "->" (the paper's code's induction-head task).
inline Item induction(Rng& r) {
  std::vector<std::string> keys, vals;
  while (keys.size() < induction_pairs) {
    std::string k = r.letters(4);
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(std::move(k)), vals.push_back(r.letters(3));
  }
  std::string context;
  for (std::size_t i = 0; i < induction_pairs; ++i) context += concat(keys[i], " -> ", vals[i], '\n');
  const std::size_t q = r.below(induction_pairs);
  return language_modeling(concat(context, keys[q], " ->"), vals[q]);
}

// A random string written again and again, cut off; its next letters. Redrawn (nullopt) when the
// string has three letters twice, read cyclically (about 1 in 60 at 24 letters).
inline std::optional<Item> repeat(Rng& r) {
  const auto length = static_cast<std::size_t>(r.between(repeat_min, repeat_max));
  const std::string s = r.letters(length);
  std::unordered_set<std::string> trigrams;
  for (std::size_t i = 0; i < length; ++i)
    if (!trigrams.insert({s[i], s[(i + 1) % length], s[(i + 2) % length]}).second) return std::nullopt;
  const auto shown = static_cast<std::size_t>(r.between(static_cast<std::int64_t>(length) + repeat_resume, 3 * static_cast<std::int64_t>(length)));
  std::string written;  // the string again and again, up to the answer's end
  for (std::size_t i = 0; i < shown + repeat_answer; ++i) written.push_back(s[i % length]);
  Item it;  // no newline after the answer: the string goes on, so none could be predicted there
  it.context = concat("Repeat: ", std::string_view(written).substr(0, shown));
  it.continuation = written.substr(shown);
  return it;
}

// The links of a chain through eight letters, shuffled; where P links from a start lead.
inline Item p_hop(Rng& r, std::size_t p) {
  const std::vector<char> node = r.distinct_letters(hop_nodes);
  std::vector<std::string> links;
  for (std::size_t i = 0; i + 1 < hop_nodes; ++i) links.push_back(concat(node[i], '>', node[i + 1]));
  r.shuffle(links);
  const std::size_t start = r.below(hop_nodes - p);
  std::string context = "Links:";
  for (const std::string& l : links) context += concat(' ', l);
  return language_modeling(concat(context, "\nStart at ", node[start], ", follow ", static_cast<std::int64_t>(p), " links:"),
                           std::string(1, node[start + p]));
}

// 4 to 12 random steps of a bracket sequence (push when empty, else push or pop evenly, at most 5
// open), at least one bracket left open; the continuation closes them.
inline Item dyck(Rng& r) {
  static constexpr std::string_view open = "([{<", close = ")]}>";
  std::string seq, stack;
  const std::int64_t steps = r.between(4, 12);
  for (std::int64_t i = 0; i < steps; ++i) {
    if (stack.empty() || (stack.size() < 5 && r.below(2) == 0)) {
      stack.push_back(close[r.below(4)]);
      seq.push_back(open[close.find(stack.back())]);
    } else {
      seq.push_back(stack.back());
      stack.pop_back();
    }
  }
  if (stack.empty()) {
    stack.push_back(close[r.below(4)]);
    seq.push_back(open[close.find(stack.back())]);
  }
  return language_modeling(concat("Close: ", seq, "\nAnswer:"), std::string(stack.rbegin(), stack.rend()));
}

enum class StringOp { copy, reverse, sort };

inline Item string_task(Rng& r, StringOp op) {
  const std::string s = r.letters(static_cast<std::size_t>(r.between(5, 8)));
  std::string out = s;
  if (op == StringOp::reverse) std::reverse(out.begin(), out.end());
  if (op == StringOp::sort) std::sort(out.begin(), out.end());
  const char* verb = op == StringOp::copy ? "Copy: " : op == StringOp::reverse ? "Reverse: " : "Sort: ";
  return language_modeling(concat(verb, s, "\nAnswer:"), out);
}

// ---- the task list ----------------------------------------------------------------------------

using Draw = std::function<std::optional<Item>(Rng&)>;

struct Generator {
  Task task;                // its fields, no items yet
  bool in_training_text;    // false for the controls (and the cloze tasks, which need a corpus)
  Draw draw;
};

inline Task task(std::string label, Axis axis, TaskType type, std::int64_t shots, std::string continuation_delimiter,
                 std::string example_delimiter, double chance) {
  Task t;
  t.dataset_uri = concat(label, ".jsonl");
  t.label = std::move(label);
  t.axis = axis;
  t.type = type;
  t.num_fewshot = shots;
  t.continuation_delimiter = std::move(continuation_delimiter);
  t.example_delimiter = std::move(example_delimiter);
  t.random_baseline = chance;
  return t;
}

inline constexpr std::string_view cloze_labels[] = {"cloze_train", "cloze_val"};

// Every task, in the order of the table at the top; the cloze tasks only with a corpus's lines.
inline std::vector<Generator> generators(std::shared_ptr<const Lines> train, std::shared_ptr<const Lines> val) {
  using A = Axis;
  using T = TaskType;
  constexpr double mc = 1.0 / mc_choices;
  const auto always = [](auto f) { return Draw([f](Rng& r) -> std::optional<Item> { return f(r); }); };
  std::vector<Generator> g;
  if (train && val) {
    g.push_back({task(std::string(cloze_labels[0]), A::parametric_knowledge, T::multiple_choice, 0, " ", "\n\n", mc), false,
                 [train](Rng& r) { return cloze(*train, nullptr, r); }});
    g.push_back({task(std::string(cloze_labels[1]), A::parametric_knowledge, T::multiple_choice, 0, " ", "\n\n", mc), false,
                 [train, val](Rng& r) { return cloze(*val, train.get(), r); }});
  }
  g.push_back({task("passage_recall", A::reading_comprehension, T::multiple_choice, 0, " ", "\n\n", mc), true,
               always([](Rng& r) { return passage_recall(r, true); })});
  g.push_back({task("passage_recall_no_passage", A::reading_comprehension, T::multiple_choice, 0, " ", "\n\n", mc), false,
               always([](Rng& r) { return passage_recall(r, false); })});
  g.push_back({task("arithmetic", A::math, T::language_modeling, 1, "\n", "", 0), true, always(arithmetic)});
  g.push_back({task("word_problems", A::math, T::multiple_choice, 0, " ", "\n\n", mc), true, always(word_problem)});
  for (const int depth : {0, 1})
    for (const bool code : {false, true})
      g.push_back({task(concat("var_assign_d", depth, code ? "_code" : "_math"), A::reasoning_primitives, T::language_modeling, 0, " ", "\n",
                        1.0 / var_count),
                   true, always([depth, code](Rng& r) { return var_assign(r, depth, code); })});
  g.push_back({task("induction", A::reasoning_primitives, T::language_modeling, 0, " ", "\n", 1.0 / induction_pairs), true, always(induction)});
  g.push_back({task("repeat", A::reasoning_primitives, T::language_modeling, 0, "", "\n", 0), true, repeat});
  for (const std::size_t p : {std::size_t{2}, std::size_t{3}})
    g.push_back({task(concat("p_hop_", static_cast<std::int64_t>(p)), A::reasoning_primitives, T::language_modeling, 1, " ", "\n",
                      1.0 / hop_nodes),
                 true, always([p](Rng& r) { return p_hop(r, p); })});
  g.push_back({task("dyck", A::compositional_symbolic, T::language_modeling, 1, " ", "\n", 0), true, always(dyck)});
  for (const auto& [label, op] : {std::pair{"copy", StringOp::copy}, std::pair{"reverse", StringOp::reverse}, std::pair{"sort", StringOp::sort}})
    g.push_back({task(label, A::compositional_symbolic, T::language_modeling, 1, " ", "\n", 0), true,
                 always([op](Rng& r) { return string_task(r, op); })});
  return g;
}

// The most bytes one item may render to so that num_fewshot examples, their delimiters and the
// item fit in max_bytes whichever items the examples are.
inline std::int64_t item_budget(const Task& t, std::int64_t max_bytes) {
  return (max_bytes - t.num_fewshot * static_cast<std::int64_t>(t.example_delimiter.size())) / (t.num_fewshot + 1);
}

// An item that fits the budget and whose rendering is not in `taken`; nullopt after
// draws_per_item tries.
inline std::optional<Item> draw_fitting(const Generator& g, Rng& r, std::int64_t budget, const std::unordered_set<std::string>& taken) {
  for (std::int64_t i = 0; i < draws_per_item; ++i) {
    std::optional<Item> it = g.draw(r);
    if (it && static_cast<std::int64_t>(longest_rendering(g.task, *it)) <= budget && !taken.contains(render_gold(g.task, *it))) return it;
  }
  return std::nullopt;
}

inline void check(const ProbeOptions& o) {
  if (o.items_per_task < 2)
    throw std::invalid_argument(
        concat("eval: probes need at least 2 items per task (a 1-shot item's example is another item), not ", o.items_per_task));
  if (o.items_per_task > max_probe_items)
    throw std::invalid_argument(concat("eval: probes make at most ", max_probe_items, " items per task (eval::max_probe_items), not ", o.items_per_task));
  if (o.max_bytes < 1) throw std::invalid_argument(concat("eval: probes need a positive max_bytes, not ", o.max_bytes));
}

}  // namespace probes_detail

// The built-in probe bundle ("builtin") of the options: every task of the table at the top of this
// file that they allow, each with items_per_task distinct items; the others in left_out with the
// reason (no corpus, or too few distinct items fit in max_bytes).
inline Probes builtin_probes(const ProbeOptions& o) {
  namespace d = probes_detail;
  d::check(o);
  Probes p;
  p.bundle.name = "builtin";
  std::shared_ptr<const d::Lines> train, val;
  if (o.corpus.empty()) {
    for (const std::string_view label : d::cloze_labels)
      p.left_out.push_back({std::string(label), "no corpus given (ProbeOptions::corpus; scripts/corpus.sh builds data/corpus)"});
  } else if (const std::string why = d::not_byte_level(o.corpus); !why.empty()) {
    for (const std::string_view label : d::cloze_labels) p.left_out.push_back({std::string(label), why});
  } else {
    std::tie(train, val) = d::read_corpus(o.corpus);
  }
  for (const d::Generator& g : d::generators(train, val)) {
    Task t = g.task;
    d::Rng r = d::rng_for(o.seed, t.label, d::Stream::evaluation);
    const std::int64_t budget = d::item_budget(t, o.max_bytes);
    std::unordered_set<std::string> seen;
    while (static_cast<std::int64_t>(t.items.size()) < o.items_per_task) {
      std::optional<Item> it = d::draw_fitting(g, r, budget, seen);
      if (!it) break;
      seen.insert(render_gold(t, *it));
      t.items.push_back(std::move(*it));
    }
    if (static_cast<std::int64_t>(t.items.size()) == o.items_per_task) {
      p.bundle.tasks.push_back(std::move(t));
    } else {
      p.left_out.push_back({t.label, concat("only ", static_cast<std::int64_t>(t.items.size()), " of ", o.items_per_task, " distinct items fit in ",
                                            budget, " bytes each (max_bytes ", o.max_bytes, " with ", t.num_fewshot, " few-shot example",
                                            t.num_fewshot == 1 ? "" : "s", ")")});
    }
  }
  return p;
}

// Leaves out of `b` each task that `tok` cannot score at `context` under `opt`: the first of its
// rows that prepare_item refuses (eval/score.hpp) is its reason. The built-in probes are written
// for byte-level models; with another tokenizer some cannot be scored (repeat's answer continues
// its prompt's letters, and a SentencePiece model merges them across the boundary, which CORE
// refuses too), and a run, a sweep's among them, scores the others. With the byte tokenizer
// nothing is left out: a refusal there is a fault of the suite, and stays an error. A bundle of the
// user's is not filtered: a bad row there is an error.
inline std::vector<LeftOut> leave_out_unscorable(Bundle& b, const data::Tokenizer& tok, std::int64_t context, const EvalOptions& opt) {
  std::vector<LeftOut> out;
  std::vector<Task> kept;
  for (Task& t : b.tasks) {
    try {
      check_scoring(t, context, opt);
      for (const std::int64_t row : select_rows(static_cast<std::int64_t>(t.items.size()), opt.max_per_task, opt.seed))
        (void)prepare_item(t, row, tok, context, opt);
    } catch (const bundle_error& e) {
      if (tok.kind() == data::Tokenizer::Kind::byte) throw;
      out.push_back({t.label, e.what()});
      continue;
    }
    kept.push_back(std::move(t));
  }
  b.tasks = std::move(kept);
  return out;
}

// The probes' training documents for the options (the corpus is not read), in order, until `more`
// returns false: each document num_fewshot + 1 items of one task, rendered with their gold answers
// (render_gold) and joined by the task's example delimiter, exactly as a scored prompt shows its
// few-shot examples before the item, then a newline (as a corpus separates its documents). Each
// document's task is drawn uniformly from the tasks in the training text (see the top of this
// file) that the options allow: those labelled in `tasks`, or all of them where it is empty. So a
// mix can train a few skills with all of its share: with nine tasks each gets a ninth of the mixed
// windows, too few for a tiny model's lookups (docs/eval.md). A label that is not such a task, or
// whose items do not fit max_bytes, is an error (std::invalid_argument, naming it). Give the
// options evaluation uses: their evaluation items are left out.
template <class More>
void probe_training_documents(const ProbeOptions& o, const std::vector<std::string>& tasks, More more) {
  namespace d = probes_detail;
  ProbeOptions without_corpus = o;
  without_corpus.corpus.clear();
  const Probes eval = builtin_probes(without_corpus);
  struct Source {
    d::Generator g;
    d::Rng r;
    std::unordered_set<std::string> eval_items;
  };
  std::vector<Source> sources;
  std::vector<d::Generator> all = d::generators(nullptr, nullptr);
  for (const std::string& label : tasks) {  // every label asked for names a task of the training text
    const auto g = std::find_if(all.begin(), all.end(), [&](const d::Generator& x) { return x.task.label == label; });
    if (g == all.end() || !g->in_training_text) {
      const bool cloze = std::find(std::begin(d::cloze_labels), std::end(d::cloze_labels), label) != std::end(d::cloze_labels);
      std::string names;
      for (const d::Generator& x : all)
        if (x.in_training_text) names += concat(names.empty() ? "" : ", ", x.task.label);
      throw std::invalid_argument(concat("eval: '", label, "' is not a task of the probes' training text (",
                                         g == all.end() && !cloze ? "no such task" : "controls and cloze tasks never are", "); it has ", names));
    }
  }
  for (d::Generator& g : all) {
    const auto t = std::find_if(eval.bundle.tasks.begin(), eval.bundle.tasks.end(), [&](const Task& x) { return x.label == g.task.label; });
    if (!g.in_training_text || t == eval.bundle.tasks.end()) continue;
    if (!tasks.empty() && std::find(tasks.begin(), tasks.end(), g.task.label) == tasks.end()) continue;
    Source s{std::move(g), d::rng_for(o.seed, t->label, d::Stream::training), {}};
    for (const Item& it : t->items) s.eval_items.insert(render_gold(*t, it));
    sources.push_back(std::move(s));
  }
  for (const std::string& label : tasks)
    if (std::none_of(sources.begin(), sources.end(), [&](const Source& x) { return x.g.task.label == label; }))
      throw std::invalid_argument(concat("eval: probe task ", label, " has too few items that fit in ", o.max_bytes, " bytes (max_bytes) to train on"));
  d::Rng which = d::rng_for(o.seed, "probe training text", d::Stream::training);
  std::string doc;
  while (!sources.empty()) {
    Source& s = sources[which.below(sources.size())];
    const Task& t = s.g.task;
    doc.clear();
    for (std::int64_t k = 0; k <= t.num_fewshot; ++k) {
      const std::optional<Item> it = d::draw_fitting(s.g, s.r, d::item_budget(t, o.max_bytes), s.eval_items);
      if (!it)
        throw std::invalid_argument(concat("eval: probe task ", t.label, " has almost no items that are not evaluation items (", o.items_per_task,
                                           " per task); ask for fewer"));
      doc += concat(k > 0 ? std::string_view(t.example_delimiter) : std::string_view(), render_gold(t, *it));
    }
    doc += '\n';
    if (!more(std::as_const(doc))) return;
  }
}

template <class More>
void probe_training_documents(const ProbeOptions& o, More more) {
  probe_training_documents(o, {}, std::move(more));
}

// The first `bytes` bytes of the probes' training text: its documents (above) one after another.
// With window > 0, laid out in windows of `window` bytes that each begin with a document: documents
// are placed whole while they fit, the rest of a window holds the start of the next document, and
// that document then begins the next window whole. A trainer that starts its windows only at
// multiples of `window` (TrainConfig::mix_stride; --mix-probes) sees every complete item with its
// whole context, as a scored prompt shows it; one drawn anywhere would mostly see an answer whose
// context (a lookup's key, the variables) was cut off. A document is at most max_bytes + 1 bytes,
// so the window must hold that.
inline std::string probe_training_text(const ProbeOptions& o, const std::vector<std::string>& tasks, std::size_t bytes, std::size_t window = 0) {
  if (window > 0 && window < static_cast<std::size_t>(o.max_bytes) + 1)
    throw std::invalid_argument(concat("eval: probe training windows of ", window, " bytes cannot hold a document of up to ", o.max_bytes + 1,
                                       " (max_bytes + 1)"));
  std::string out;
  std::size_t used = 0;  // bytes of the current window
  probe_training_documents(o, tasks, [&](const std::string& doc) {
    if (window > 0 && used + doc.size() > window) {
      if (doc.size() > window) throw std::logic_error(concat("eval: a probe training document of ", doc.size(), " bytes exceeds its window of ", window));
      out.append(doc, 0, window - used);
      used = 0;
    }
    out += doc;
    used += doc.size();
    return out.size() < bytes;
  });
  out.resize(std::min(out.size(), bytes));
  return out;
}

inline std::string probe_training_text(const ProbeOptions& o, std::size_t bytes, std::size_t window = 0) {
  return probe_training_text(o, {}, bytes, window);
}

// How much training text to write for a run that mixes `mixed_bytes` bytes of it in: four times as
// much, so that a sampler drawing windows with replacement (train/data.hpp) draws few twice (a
// window is drawn again with probability about 1/8 over the run), between 2 MiB and 64 MiB (a
// longer run draws windows again; the cap keeps the file and its writing small).
inline std::size_t probe_text_bytes(double mixed_bytes) {
  constexpr double least = std::size_t{2} << 20, most = std::size_t{64} << 20;
  return static_cast<std::size_t>(std::clamp(4 * mixed_bytes, least, most));
}

inline std::string probe_training_text(std::uint64_t seed, std::size_t bytes) {
  ProbeOptions o;
  o.seed = seed;
  return probe_training_text(o, bytes);
}

}  // namespace loopscale::eval
