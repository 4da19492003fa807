// Tokenizers: the byte tokenizer and a SentencePiece model trained here, exact round trips of any
// bytes (invalid UTF-8 through byte fallback), and training that leaves validation documents out.
#include <catch2/catch.hpp>

#include <string>

#include "corpus/helpers.hpp"
#include "loopscale/data/tokenizer.hpp"
#include "loopscale/data/tokenizer_train.hpp"

using namespace loopscale;
using namespace loopscale::data;
using namespace loopscale::test;

namespace {

// A SentencePiece model of `vocab` pieces trained on 400 synthetic documents (a JSONL file).
std::string trained_model(const fs::path& dir, std::uint32_t vocab, const std::string& model = "bpe") {
  std::ofstream f(dir / "docs.jsonl");
  for (int i = 0; i < 400; ++i) f << nlohmann::json{{"text", document(i)}}.dump() << "\n";
  f.close();
  TokenizerTrainOptions o;
  o.input.paths = {(dir / "docs.jsonl").string()};
  o.vocab = vocab;
  o.model = model;
  o.threads = 2;
  return train_tokenizer(o).model;
}

const std::vector<std::string>& hard_texts() {
  static const std::vector<std::string> t = {
      "",
      "plain ascii, the cat sat on the mat.\n",
      "  leading and trailing spaces, \t tabs,\r\nCRLF and\n\n\nblank lines  \n",
      "déjà vu — naïve 日本語 😀 and a long unseen word: Pneumonoultramicroscopicsilicovolcanoconiosis",
      std::string("invalid UTF-8: \xff\xfe, a lone continuation \x80, truncated \xe6\x97, overlong \xc0\xaf, surrogate \xed\xa0\x80 end"),
      std::string("NUL \0 inside", 13),
      "SentencePiece's own space marker \xE2\x96\x81 and \xE2\x96\x81\xE2\x96\x81 twice",
      std::string("\xff"),
      "12345678901234567890 digits",
  };
  return t;
}

}  // namespace

TEST_CASE("tokenizer: the byte tokenizer is the identity on bytes", "[corpus][tokenizer]") {
  const Tokenizer t;
  REQUIRE(t.vocab() == 256);
  for (const std::string& s : hard_texts()) {
    const auto ids = t.encode(s);
    REQUIRE(ids.size() == s.size());
    for (std::size_t i = 0; i < s.size(); ++i) REQUIRE(ids[i] == static_cast<unsigned char>(s[i]));
    REQUIRE(t.decode(ids) == s);
    REQUIRE(t.text_bytes(ids) == s.size());
  }
}

TEST_CASE("tokenizer: SentencePiece decode(encode(text)) == text, invalid UTF-8 included (byte fallback)", "[corpus][tokenizer]") {
  const fs::path dir = temp_dir("spm");
  for (const std::string model : {"bpe", "unigram"}) {
    // The unigram trainer finds at most 344 pieces in these 400 documents (SentencePiece refuses a
    // larger vocabulary); byte fallback's 256 byte pieces and 3 specials need at least 259.
    const std::uint32_t vocab = model == "bpe" ? 450 : 340;
    const Tokenizer t = Tokenizer::sentencepiece(trained_model(dir, vocab, model), model);
    REQUIRE(t.vocab() == vocab);
    REQUIRE(t.kind() == Tokenizer::Kind::sentencepiece);
    for (const std::string& s : hard_texts()) {
      const auto ids = t.encode(s);
      INFO(model << ": " << s);
      REQUIRE(t.decode(ids) == s);
      REQUIRE(t.text_bytes(ids) == s.size());
      for (const auto id : ids) REQUIRE((id >= 0 && static_cast<std::uint32_t>(id) < t.vocab()));
    }
    // Invalid bytes become byte pieces; text it was trained on is compressed.
    REQUIRE(t.encode(std::string("\xff")) == std::vector<std::int32_t>{t.byte_id(0xff)});
    const std::string seen = document(3);
    INFO(model << " encodes " << seen.size() << " bytes of a training document in " << t.encode(seen).size() << " tokens");
    REQUIRE(t.encode(seen).size() * (model == "bpe" ? 2 : 1) < seen.size());
    REQUIRE(t.encode("\n").size() == 1);  // newline is one piece
  }
  fs::remove_all(dir);
}

TEST_CASE("tokenizer: a model without byte fallback or a file that is no model is refused", "[corpus][tokenizer]") {
  const fs::path dir = temp_dir("spm_bad");
  write_text(dir / "junk.model", "this is not a protobuf");
  REQUIRE_THROWS_WITH(Tokenizer::load((dir / "junk.model").string()), Catch::Contains("junk.model") && Catch::Contains("not a SentencePiece model"));
  REQUIRE_THROWS_WITH(Tokenizer::load((dir / "absent.model").string()), Catch::Contains("cannot open tokenizer"));
  fs::remove_all(dir);
}

TEST_CASE("tokenizer training leaves out the documents the split puts into validation", "[corpus][tokenizer]") {
  const fs::path dir = temp_dir("spm_split");
  std::ofstream f(dir / "docs.jsonl");
  for (int i = 0; i < 300; ++i) f << nlohmann::json{{"text", document(i)}}.dump() << "\n";
  f.close();
  TokenizerTrainOptions o;
  o.input.paths = {(dir / "docs.jsonl").string()};
  o.vocab = 400;
  o.split = {0.25, 7};
  const TokenizerTrainResult r = train_tokenizer(o);
  int val = 0;
  for (int i = 0; i < 300; ++i) val += o.split.validation(document(i));
  REQUIRE(val > 40);
  REQUIRE(val < 110);
  REQUIRE(r.documents == static_cast<std::uint64_t>(300 - val));
  // An input with no text at all is an error.
  write_text(dir / "empty.jsonl", "\n\n");
  o.input.paths = {(dir / "empty.jsonl").string()};
  REQUIRE_THROWS_WITH(train_tokenizer(o), Catch::Contains("empty.jsonl") && Catch::Contains("empty input"));
  fs::remove_all(dir);
}
