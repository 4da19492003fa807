// A trained model, loaded for evaluation: the spec, the float parameters, the MoE selection biases
// and the tokenizer of a run folder that `loopscale train --out DIR` wrote (train/trainer.hpp lists
// its files), or of a model built in memory (run_model_of, for tests and custom loops). Scoring
// (eval/model_scorer.hpp) and generation (eval/generate.hpp) read only this.
//
// load_run(DIR) reads
//   config.json            the run's TrainConfig (spec, seq_len, softcap, MoE routing) and the
//                          tokenizer its corpus had ("tokenizer", data::tokenizer_record)
//   checkpoint.bin         the parameters, through train/checkpoint.hpp's loader with every one of its
//                          checks (size against the header, XXH3-64 checksum); when it is missing,
//                          truncated or corrupt and checkpoint.prev.bin is good, that one is used and
//                          RunModel::warning says so in one line (the trainer's resume does the same)
// and checks that they belong together: the checkpoint's recorded config has the same model keys
// as config.json, it holds exactly the spec's parameter count (account/params.hpp) and one
// selection bias per expert of every MoE layer. Every problem is one line naming the file and what
// is wrong, as the library's usual error types, so the `loopscale` program exits 2 on it:
// train::config_error (the folder, config.json and its spec), train::checkpoint_error
// (the checkpoints), data::corpus_error (the tokenizer file).
//
// The tokenizer: "byte" is data::Tokenizer's byte tokenizer; "sentencepiece" is loaded from the
// absolute path the run recorded and refused unless its checksum is the recorded one (the same ids
// must mean the same text); a run on a corpus of imported tokens ("external", or a folder without a
// manifest whose vocab is not 256) has no tokenizer loopscale can use: RunModel::tokenizer is empty
// and such a run is scored on tokens only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopscale/account/params.hpp"
#include "loopscale/data/checksum.hpp"
#include "loopscale/data/error.hpp"
#include "loopscale/data/tokenizer.hpp"
#include "loopscale/spec/limits.hpp"
#include "loopscale/spec/spec.hpp"
#include "loopscale/spec/spec_json.hpp"
#include "loopscale/train/checkpoint.hpp"
#include "loopscale/train/model.hpp"
#include "loopscale/train/moe_routing.hpp"
#include "loopscale/train/trainer.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::eval {

struct RunModel {
  std::filesystem::path folder;      // the run folder (empty: built in memory)
  std::filesystem::path checkpoint;  // the checkpoint the parameters came from
  std::string warning;               // one line when checkpoint.prev.bin stood in for checkpoint.bin
  int64 step = 0;                    // the training step the parameters are from
  ModelSpec spec{};
  int64 seq_len = 0;                 // the trained sequence length: the positions (RoPE angles) it saw
  double softcap = 15.0;             // the logit softcap it trained with
  train::MoeRouting routing{};       // its MoE routing, as trained (capacity included)
  std::vector<float> params;         // the flat parameters, in train::Transformer's layout
  std::vector<std::vector<float>> moe_bias;  // each MoE layer's selection bias, in the model's order
  nlohmann::json tokenizer_record = {{"kind", "unknown"}, {"vocab", 0}};  // what the run recorded
  std::optional<data::Tokenizer> tokenizer;  // none for imported tokens (see the top of this file)

  // The longest token sequence a scorer or generator takes: seq_len positions are read (each
  // predicts the next token), so seq_len + 1 tokens, as a training window has.
  int64 context() const { return seq_len + 1; }

  // The MoE routing at inference: the trained one without a capacity. With a capacity the training
  // forward lets an expert run only the first C of the slots routed to it in a call, in the order
  // (choice rank, token): whether a token's slot runs depends on the other tokens of the batch,
  // later positions of its own sequence included (a later token's first choice outranks an earlier
  // token's second). Such scores would change with the padding and the batch, and one token at a
  // time (generation) could not reproduce them at all. Dropless routing is a pure function of the
  // token's own state, the same in a batch and alone; the trained selection bias is kept.
  train::MoeRouting inference_routing() const {
    train::MoeRouting r = routing;
    r.capacity_factor = 0;
    return r;
  }

  // What began every document the run trained on: its BOS where the corpus was packed (data
  // prepare --pack, the record's "bos"), else nothing (documents joined by a newline). Evaluation
  // and sampling put it before each prompt, as the paper's evaluation puts its BOS.
  std::vector<std::int32_t> document_start() const {
    const auto b = tokenizer_record.find("bos");
    if (b == tokenizer_record.end() || !b->is_number_integer() || b->get<std::int64_t>() < 0) return {};
    return {static_cast<std::int32_t>(b->get<std::int64_t>())};
  }

  // The tokenizer, or a corpus_error when the run's corpus had none loopscale can read.
  const data::Tokenizer& text_tokenizer() const {
    if (!tokenizer)
      throw data::corpus_error(concat("the run ", folder.string(), " was trained on tokens without a tokenizer loopscale can read (",
                                      tokenizer_record.dump(), "); score it on tokens"));
    return *tokenizer;
  }
};

namespace detail {

// The expert count of every MoE layer, in the order train::Transformer numbers them (prelude,
// block, coda).
inline std::vector<int64> moe_experts(const ModelSpec& s) {
  std::vector<int64> e;
  for (const StackSpec* st : {&s.prelude, &s.recur.block, &s.coda})
    for (const LayerSpec& l : st->layers)
      if (l.ffn.moe()) e.push_back(l.ffn.experts);
  return e;
}

inline nlohmann::json read_json_file(const std::filesystem::path& p) {
  if (const std::string why = not_a_file(p); !why.empty()) throw train::config_error(why);
  std::ifstream in(p);
  if (!in) throw train::config_error(concat("cannot read ", p.string()));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw train::config_error(concat(p.string(), " is not valid JSON (", e.what(), ")"));
  }
}

// The checkpoint of a run folder, falling back to checkpoint.prev.bin (see the top of this file).
inline train::Checkpoint<float> load_run_checkpoint(const train::detail::RunFiles& f, std::string& warning) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool current = fs::exists(f.checkpoint, ec), previous = fs::exists(f.prev, ec);
  if (!current && !previous)
    throw train::checkpoint_error(concat(f.out.string(), " holds no checkpoint (", f.checkpoint.filename().string(), " or ",
                                         f.prev.filename().string(), "); a run writes one at its end and every --checkpoint-every steps"));
  const auto from_previous = [&](const std::string& why) {
    train::Checkpoint<float> c;
    try {
      c = train::load_checkpoint<float>(f.prev);
    } catch (const train::checkpoint_error& e) {
      throw train::checkpoint_error(concat("no usable checkpoint in ", f.out.string(), ": ", why, "; and ", e.what()));
    }
    warning = concat(why, "; evaluating ", f.prev.string(), " (step ", c.meta.value("step", int64{-1}), ")");
    return c;
  };
  if (!current) return from_previous(f.checkpoint.string() + " is missing");
  try {
    return train::load_checkpoint<float>(f.checkpoint);
  } catch (const train::checkpoint_error& e) {
    if (!previous) throw;
    return from_previous(e.what());
  }
}

// The tokenizer a run recorded (see the top of this file); `where` names the record in errors.
inline std::optional<data::Tokenizer> recorded_tokenizer(const nlohmann::json& rec, const std::string& where) {
  const auto text = [&](const char* key) {
    const nlohmann::json& v = rec.is_object() && rec.contains(key) ? rec.at(key) : nlohmann::json();
    if (!v.is_null() && !v.is_string())
      throw data::corpus_error(concat("the tokenizer record in ", where, " has a '", key, "' that is not text: ", v.dump()));
    return v.is_string() ? v.get<std::string>() : std::string();
  };
  const std::string kind = text("kind");
  std::optional<data::Tokenizer> t;
  if (kind == "byte") {
    t.emplace();
  } else if (kind == "sentencepiece") {
    const std::string path = text("path");
    std::error_code ec;
    if (path.empty() || !std::filesystem::is_regular_file(path, ec))
      throw data::corpus_error(concat("the SentencePiece tokenizer '", path, "' recorded in ", where, " cannot be opened"));
    const std::string want = text("checksum");
    if (!want.empty())
      if (const std::string got = data::file_checksum(path); got != want)
        throw data::corpus_error(concat("the tokenizer ", path, " has checksum ", got, " but ", where, " recorded ", want,
                                        ": it is not the tokenizer the run was trained with"));
    t = data::Tokenizer::load(path);
  } else {
    return std::nullopt;  // imported tokens: no tokenizer loopscale can read
  }
  const nlohmann::json& vocab = rec.contains("vocab") ? rec.at("vocab") : nlohmann::json();
  if (vocab.is_number_unsigned() && vocab.get<std::uint64_t>() != t->vocab())
    throw data::corpus_error(concat("the tokenizer recorded in ", where, " has vocab ", vocab.dump(), ", the one loaded has ",
                                    std::to_string(t->vocab())));
  return t;
}

}  // namespace detail

// A run folder (see the top of this file).
inline RunModel load_run(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A file given for the folder was said not to exist, naming the wrong problem.
  if (!fs::is_directory(dir, ec))
    throw train::config_error(fs::exists(dir, ec) ? concat("the run folder ", dir.string(), " is a file, not a folder (give the folder train --out wrote)")
                                                  : concat("the run folder ", dir.string(), " does not exist"));
  const train::detail::RunFiles files(dir);
  if (!fs::exists(files.config, ec))
    throw train::config_error(concat(files.config.string(), " is missing: ", dir.string(),
                                     " is not a run folder (loopscale train --out writes config.json)"));
  const nlohmann::json cj = detail::read_json_file(files.config);
  train::TrainConfig cfg;
  try {
    cfg = train::config_from_json(cj);
    // The trainer's checks (a batch of 0, say, would divide by zero in the validation windows,
    // eval/validation.hpp), less those of how it ran, which evaluation does not repeat: threads,
    // device, precision and the split of the work, whose limits an older loopscale did not have.
    train::TrainConfig as_run = cfg;
    const train::TrainConfig defaults;
    as_run.threads = defaults.threads, as_run.device = defaults.device, as_run.precision = defaults.precision;
    as_run.thread_split = defaults.thread_split, as_run.accum = defaults.accum, as_run.reduction = defaults.reduction;
    train::detail::check_config(as_run);
  } catch (const std::invalid_argument& e) {  // config_error, or spec_error from the spec's JSON
    throw train::config_error(concat(files.config.string(), ": ", e.what()));
  }
  RunModel m;
  m.folder = dir;
  m.spec = cfg.spec;
  m.seq_len = cfg.seq_len;
  m.softcap = cfg.softcap;
  try {
    if (const std::string f = size_fault(m.spec); !f.empty()) throw spec_error(f);
    validate(m.spec);
    m.routing.router = train::parse_router(cfg.moe_router);
    m.routing.renormalize = cfg.moe_renormalize;
    train::parse_balance(cfg.moe_balance, m.routing);
    m.routing.z_coef = cfg.moe_z_loss;
    m.routing.capacity_factor = cfg.moe_capacity;
    train::validate(m.routing);
  } catch (const spec_error& e) {
    throw spec_error(concat(files.config.string(), ": ", e.what()));
  }
  if (m.seq_len < 1 || !(m.softcap >= 0) || !std::isfinite(m.softcap))
    throw train::config_error(concat(files.config.string(), ": seq_len must be at least 1 and softcap a non-negative number"));

  train::Checkpoint<float> ck = detail::load_run_checkpoint(files, m.warning);
  m.checkpoint = ck.path;
  const std::string name = concat("checkpoint ", ck.path.string());
  // The checkpoint records the config it was trained with; the keys that define the model must be
  // config.json's (a checkpoint copied from another run would otherwise load as this one).
  // The spec is compared as a spec, not as text: an older checkpoint may spell it in an older form
  // that reads as the same model (spec/spec_json.hpp).
  const nlohmann::json now = cfg;
  const nlohmann::json& was = ck.meta.contains("config") && ck.meta.at("config").is_object() ? ck.meta.at("config") : nlohmann::json();
  const auto differs = [&](const char* k) {
    if (std::string_view(k) != "spec") return was.at(k) != now.at(k);
    try {
      return !(was.at(k).get<ModelSpec>() == m.spec);
    } catch (const std::exception&) {
      return true;  // not a spec at all
    }
  };
  for (const char* k : {"spec", "seq_len", "softcap", "moe_router", "moe_renormalize", "moe_balance", "moe_z_loss", "moe_capacity"})
    if (was.is_object() && was.contains(k) && differs(k))
      throw train::checkpoint_error(concat(name, " is not the model of ", files.config.string(), ": its '", k, "' differs"));
  const int64 want = count_params(m.spec).total;
  if (static_cast<int64>(ck.params.size()) != want)
    throw train::checkpoint_error(concat(name, " holds ", static_cast<int64>(ck.params.size()), " parameters, the model of ",
                                         files.config.string(), " has ", want));
  const std::vector<int64> experts = detail::moe_experts(m.spec);
  if (!experts.empty()) {
    const nlohmann::json& b = ck.meta.contains("moe_bias") ? ck.meta.at("moe_bias") : nlohmann::json();
    bool ok = b.is_array() && b.size() == experts.size();
    for (std::size_t i = 0; ok && i < experts.size(); ++i) {
      ok = b[i].is_array() && static_cast<int64>(b[i].size()) == experts[i];
      for (std::size_t e = 0; ok && e < b[i].size(); ++e) ok = b[i][e].is_number();
      if (ok) m.moe_bias.push_back(b[i].get<std::vector<float>>());
    }
    if (!ok)
      throw train::checkpoint_error(concat(name, " lacks one selection bias per expert of each of the model's ",
                                           static_cast<int64>(experts.size()), " MoE layers"));
  }
  const nlohmann::json& step = ck.meta.contains("step") ? ck.meta.at("step") : nlohmann::json();
  m.step = step.is_number_integer() ? step.get<int64>() : 0;
  m.params = std::move(ck.params);

  // The tokenizer the parameters were trained with: the checkpoint's record, else config.json's.
  const bool in_ckpt = ck.meta.contains("tokenizer") && ck.meta.at("tokenizer").is_object();
  m.tokenizer_record = in_ckpt ? ck.meta.at("tokenizer") : cj.value("tokenizer", m.tokenizer_record);
  m.tokenizer = detail::recorded_tokenizer(m.tokenizer_record, in_ckpt ? name : files.config.string());
  return m;
}

// A model in memory as a RunModel: its spec, sequence length, softcap, routing, parameters and
// selection biases (copied); no folder and no tokenizer.
template <class B>
RunModel run_model_of(const train::Transformer<float, B>& model) {
  RunModel m;
  m.spec = model.spec();
  m.seq_len = model.seq_len();
  m.softcap = model.softcap();
  m.routing = model.moe_routing();
  m.params.resize(static_cast<std::size_t>(model.num_params()));
  model.read_params(m.params);
  for (int64 i = 0; i < model.moe_layers(); ++i) m.moe_bias.push_back(model.read_moe_bias(i));
  return m;
}

// The forward-only engine of a loaded model for batches of `batch` sequences of `seq_len`
// positions, running r recurrences: it reads the RunModel's parameters in place (the RunModel must
// outlive it), holds its selection biases and routes without capacity (inference_routing).
template <class B>
std::unique_ptr<train::Transformer<float, B>> inference_model(const RunModel&&, int64, int64, int64) = delete;
template <class B>
std::unique_ptr<train::Transformer<float, B>> inference_model(const RunModel& m, int64 batch, int64 seq_len, int64 r) {
  train::check_recurrences(m.spec, r);
  auto t = std::make_unique<train::Transformer<float, B>>(train::forward_only, m.spec, batch, seq_len, m.softcap, m.inference_routing(),
                                                         std::span<const float>(m.params));
  if (static_cast<int64>(m.moe_bias.size()) != t->moe_layers())
    throw std::invalid_argument(concat("the model has ", t->moe_layers(), " MoE layers but ", static_cast<int64>(m.moe_bias.size()),
                                       " selection biases were given"));
  for (int64 i = 0; i < t->moe_layers(); ++i) {
    const std::vector<float>& b = m.moe_bias[static_cast<std::size_t>(i)];
    const int64 experts = t->moe_shape(i).experts;
    if (static_cast<int64>(b.size()) != experts)
      throw std::invalid_argument(concat("MoE layer ", t->moe_name(i), " has ", experts, " experts but ",
                                         static_cast<int64>(b.size()), " selection biases were given"));
    t->write_moe_bias(i, b);
  }
  t->set_recurrences(r);
  return t;
}

}  // namespace loopscale::eval
