// Reading tokenizer files: Hugging Face tokenizer.json, GPT-2 vocab.json +
// merges.txt. Everything kiln cannot run exactly is refused with the file
// and the setting named, rather than tokenized differently.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/data/tokenizer.h"

namespace kiln {

using data::AddedToken;
using data::NormalForm;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  std::error_code ec;
  KILN_CHECK(!fs::is_directory(path, ec), path, ": is a directory, not a file");
  KILN_CHECK(!fs::exists(path, ec) || fs::is_regular_file(path, ec), path,
             ": is not a regular file (a device, pipe or socket)");
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f, path, ": cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  KILN_CHECK(!f.bad(), path, ": read failed");
  return ss.str();
}

// An integer in [0, INT32_MAX]. JSON reads non-negative integers as
// unsigned: 18446744073709551615 must not wrap to -1 on the way.
bool is_token_id(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(INT32_MAX);
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX;
}

json parse_json(std::string_view text, const std::string& origin) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too big
    std::string what = e.what();
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    fail(origin, ": not valid JSON (", what, ")");
  }
}

// Reading one tokenizer.json; `where` prefixes every message.
struct Reader {
  std::string where;

  const json& need(const json& obj, const char* key, const char* in) const {
    KILN_CHECK(obj.is_object(), where, ": \"", in, "\" must be a JSON object");
    auto it = obj.find(key);
    KILN_CHECK(it != obj.end(), where, ": \"", in, "\" has no \"", key, "\"");
    return *it;
  }
  std::string type_of(const json& obj, const char* in) const {
    const json& t = need(obj, "type", in);
    KILN_CHECK(t.is_string(), where, ": ", in, ".type must be a string");
    return t.get<std::string>();
  }
  bool flag(const json& obj, const char* key, bool dflt, const char* in) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    KILN_CHECK(it->is_boolean(), where, ": ", in, ".", key, " must be true or false");
    return it->get<bool>();
  }

  void normalizer(const json& n, std::vector<NormalForm>& out) const {
    if (n.is_null()) return;
    std::string type = type_of(n, "normalizer");
    if (type == "Sequence") {
      const json& list = need(n, "normalizers", "normalizer");
      KILN_CHECK(list.is_array(), where, ": normalizer.normalizers must be a list");
      for (const json& m : list) normalizer(m, out);
    } else if (type == "NFC") out.push_back(NormalForm::nfc);
    else if (type == "NFD") out.push_back(NormalForm::nfd);
    else if (type == "NFKC") out.push_back(NormalForm::nfkc);
    else if (type == "NFKD") out.push_back(NormalForm::nfkd);
    else fail(where, ": normalizer type '", type, "' is not supported (kiln runs NFC, NFD, NFKC, NFKD and Sequence)");
  }

  // Returns whether a ByteLevel step was seen.
  bool pre_tokenizer(const json& p, std::vector<PreTokenizeStep>& out) const {
    if (p.is_null()) return false;
    std::string type = type_of(p, "pre_tokenizer");
    if (type == "Sequence") {
      const json& list = need(p, "pretokenizers", "pre_tokenizer");
      KILN_CHECK(list.is_array(), where, ": pre_tokenizer.pretokenizers must be a list");
      bool byte_level = false;
      for (const json& q : list) {
        KILN_CHECK(!byte_level, where, ": a pre-tokenizer after ByteLevel is not supported");
        byte_level = pre_tokenizer(q, out);
      }
      return byte_level;
    }
    if (type == "Split") {
      const json& pattern = need(p, "pattern", "Split pre_tokenizer");
      auto regex = pattern.find("Regex");
      KILN_CHECK(pattern.is_object() && regex != pattern.end() && regex->is_string(), where,
                 ": Split pre_tokenizer: only {\"Regex\": ...} patterns are supported, got ", pattern.dump());
      auto known = data::find_split_pattern(regex->get<std::string>());
      KILN_CHECK(known, where, ": Split pre_tokenizer regex is not one kiln implements (GPT-2, Llama 3, "
                 "Qwen2/3): ", regex->dump());
      std::string behavior = p.value("behavior", "");
      KILN_CHECK(behavior == "Isolated", where, ": Split behavior '", behavior,
                 "' is not supported (only Isolated)");
      KILN_CHECK(!flag(p, "invert", false, "Split"), where, ": Split with invert=true is not supported");
      out.push_back({PreTokenizeStep::split, *known});
      return false;
    }
    if (type == "ByteLevel") {
      if (flag(p, "add_prefix_space", true, "ByteLevel")) out.push_back({PreTokenizeStep::prefix_space});
      if (flag(p, "use_regex", true, "ByteLevel")) out.push_back({PreTokenizeStep::split, data::SplitPattern::gpt2});
      return true;
    }
    fail(where, ": pre_tokenizer type '", type, "' is not supported (kiln runs ByteLevel, Split, Sequence)");
  }

  void model(const json& m, TokenizerSpec& spec) const {
    KILN_CHECK(m.is_object(), where, ": \"model\" must be a JSON object");
    if (m.contains("type")) {
      std::string type = type_of(m, "model");
      KILN_CHECK(type == "BPE", where, ": model type '", type, "' is not supported (kiln reads byte-level BPE)");
    }
    const json& vocab = need(m, "vocab", "model");
    KILN_CHECK(vocab.is_object(), where, ": model.vocab must be an object of token: id");
    spec.vocab.reserve(vocab.size());
    for (const auto& [token, id] : vocab.items()) {
      KILN_CHECK(is_token_id(id), where, ": model.vocab: id of '", token,
                 "' must be an integer in [0, 2147483647], got ", id.dump());
      spec.vocab.emplace_back(token, id.get<int32_t>());
    }
    const json& merges = need(m, "merges", "model");
    KILN_CHECK(merges.is_array(), where, ": model.merges must be a list");
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const json& e = merges[i];
      if (e.is_string()) {
        std::string s = e.get<std::string>();
        size_t sp = s.find(' ');
        KILN_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < s.size() && s.find(' ', sp + 1) == std::string::npos,
                   where, ": model.merges[", i, "] = ", e.dump(), " is not two tokens separated by one space");
        spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        KILN_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string(), where,
                   ": model.merges[", i, "] = ", e.dump(), " is not a pair of tokens");
        spec.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      }
    }
    spec.bpe.ignore_merges = flag(m, "ignore_merges", false, "model");
    spec.bpe.fuse_unk = flag(m, "fuse_unk", false, "model");
    KILN_CHECK(!flag(m, "byte_fallback", false, "model"), where,
               ": model.byte_fallback=true (SentencePiece-style BPE) is not supported");
    if (auto u = m.find("unk_token"); u != m.end() && !u->is_null()) {
      KILN_CHECK(u->is_string(), where, ": model.unk_token must be a string or null");
      spec.bpe.unk_token = u->get<std::string>();
    }
    if (auto d = m.find("dropout"); d != m.end() && !d->is_null())
      KILN_CHECK(d->is_number() && d->get<double>() == 0.0, where, ": model.dropout is not supported (set it to null)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (auto a = m.find(key); a != m.end() && !a->is_null())
        KILN_CHECK(a->is_string() && a->get<std::string>().empty(), where, ": model.", key, " = ", a->dump(),
                   " is not supported (byte-level BPE has none)");
  }

  void added_tokens(const json& list, std::vector<AddedToken>& out) const {
    if (list.is_null()) return;
    KILN_CHECK(list.is_array(), where, ": \"added_tokens\" must be a list");
    for (const json& t : list) {
      AddedToken a;
      const json& content = need(t, "content", "added_tokens[]");
      const json& id = need(t, "id", "added_tokens[]");
      KILN_CHECK(content.is_string() && !content.get<std::string>().empty(), where,
                 ": added token content must be a non-empty string, got ", content.dump());
      KILN_CHECK(is_token_id(id), where, ": added token ", content.dump(),
                 ": id must be an integer in [0, 2147483647], got ", id.dump());
      a.content = content.get<std::string>();
      a.id = id.get<int32_t>();
      a.special = flag(t, "special", false, "added_tokens[]");
      a.normalized = flag(t, "normalized", !a.special, "added_tokens[]");
      a.lstrip = flag(t, "lstrip", false, "added_tokens[]");
      a.rstrip = flag(t, "rstrip", false, "added_tokens[]");
      a.single_word = flag(t, "single_word", false, "added_tokens[]");
      out.push_back(std::move(a));
    }
  }

  // Only the single-sequence template matters (pairs are not encoded);
  // ByteLevel post-processing adjusts offsets kiln does not report.
  void post_processor(const json& p, TokenizerSpec& spec) const {
    if (p.is_null()) return;
    std::string type = type_of(p, "post_processor");
    if (type == "Sequence") {
      const json& list = need(p, "processors", "post_processor");
      KILN_CHECK(list.is_array(), where, ": post_processor.processors must be a list");
      for (const json& q : list) post_processor(q, spec);
      return;
    }
    if (type == "ByteLevel") return;
    KILN_CHECK(type == "TemplateProcessing", where, ": post_processor type '", type,
               "' is not supported (kiln runs TemplateProcessing, ByteLevel and Sequence)");
    const json& single = need(p, "single", "TemplateProcessing");
    const json& specials = p.value("special_tokens", json::object());
    KILN_CHECK(single.is_array(), where, ": TemplateProcessing.single must be a list");
    bool text_seen = false;
    for (const json& piece : single) {
      if (piece.contains("Sequence")) {
        text_seen = true;
        continue;
      }
      KILN_CHECK(piece.contains("SpecialToken") && piece["SpecialToken"].contains("id"), where,
                 ": TemplateProcessing.single entry ", piece.dump(),
                 " is neither a Sequence nor a SpecialToken");
      const std::string name = piece["SpecialToken"]["id"].get<std::string>();
      KILN_CHECK(specials.contains(name) && specials[name].contains("ids"), where,
                 ": TemplateProcessing names special token '", name,
                 "' that its special_tokens do not list");
      for (const json& id : specials[name]["ids"]) {
        KILN_CHECK(is_token_id(id), where, ": TemplateProcessing special token '", name,
                   "' has id ", id.dump());
        (text_seen ? spec.suffix_ids : spec.prefix_ids).push_back(id.get<int32_t>());
      }
    }
  }

  void decoder(const json& d) const {
    if (d.is_null()) return;
    std::string type = type_of(d, "decoder");
    KILN_CHECK(type == "ByteLevel", where, ": decoder type '", type, "' is not supported (kiln decodes ByteLevel)");
  }
};

Tokenizer build(TokenizerSpec spec, const std::string& origin) {
  try {
    return Tokenizer(std::move(spec));
  } catch (const Error& e) {
    fail(origin, ": ", e.what());
  }
}

}  // namespace

Tokenizer Tokenizer::from_json_text(std::string_view text, const std::string& origin) {
  json j = parse_json(text, origin);
  Reader r{origin};
  KILN_CHECK(j.is_object(), origin, ": not a tokenizer.json (the top level is not a JSON object)");
  KILN_CHECK(j.contains("model"), origin, ": no \"model\" section; is this a Hugging Face tokenizer.json?");
  TokenizerSpec spec;
  try {
    r.model(j["model"], spec);
    r.normalizer(j.value("normalizer", json()), spec.normalizers);
    KILN_CHECK(r.pre_tokenizer(j.value("pre_tokenizer", json()), spec.pre_tokenizer), origin,
               ": the pre_tokenizer has no ByteLevel step; kiln reads byte-level BPE only");
    r.decoder(j.value("decoder", json()));
    r.post_processor(j.value("post_processor", json()), spec);
    r.added_tokens(j.value("added_tokens", json()), spec.added_tokens);
  } catch (const json::exception& e) {
    fail(origin, ": malformed tokenizer.json (", e.what(), ")");
  }
  return build(std::move(spec), origin);
}

Tokenizer Tokenizer::from_json_file(const std::string& path) { return from_json_text(read_file(path), path); }

Tokenizer Tokenizer::from_gpt2_files(const std::string& vocab_json, const std::string& merges_txt) {
  TokenizerSpec spec;
  json vocab = parse_json(read_file(vocab_json), vocab_json);
  KILN_CHECK(vocab.is_object(), vocab_json, ": must be a JSON object of token: id");
  for (const auto& [token, id] : vocab.items()) {
    KILN_CHECK(is_token_id(id), vocab_json, ": id of '", token,
               "' must be an integer in [0, 2147483647], got ", id.dump());
    spec.vocab.emplace_back(token, id.get<int32_t>());
    if (token == "<|endoftext|>") spec.added_tokens.push_back({token, id.get<int32_t>(), true});
  }
  std::istringstream lines(read_file(merges_txt));
  std::string line;
  for (size_t n = 1; std::getline(lines, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#version")) continue;
    size_t sp = line.find(' ');
    KILN_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
               merges_txt, ":", n, ": '", line, "' is not two tokens separated by one space");
    spec.merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  spec.pre_tokenizer.push_back({PreTokenizeStep::split, data::SplitPattern::gpt2});
  return build(std::move(spec), vocab_json + " + " + merges_txt);
}

bool folder_has_tokenizer(const std::string& dir) {
  std::error_code ec;
  const fs::path p(dir);
  return fs::is_regular_file(p / "tokenizer.json", ec) ||
         (fs::is_regular_file(p / "vocab.json", ec) && fs::is_regular_file(p / "merges.txt", ec));
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  if (fs::is_directory(p, ec)) {
    KILN_CHECK(folder_has_tokenizer(path), path,
               ": directory has neither tokenizer.json nor vocab.json + merges.txt");
    if (fs::is_regular_file(p / "tokenizer.json", ec))
      return from_json_file((p / "tokenizer.json").string());
    return from_gpt2_files((p / "vocab.json").string(), (p / "merges.txt").string());
  }
  KILN_CHECK(fs::exists(p, ec), path, ": no such file");
  if (p.filename() == "vocab.json") {
    fs::path merges = p.parent_path() / "merges.txt";
    KILN_CHECK(fs::exists(merges, ec), path, ": a GPT-2 vocab.json needs merges.txt beside it (",
               merges.string(), " not found)");
    return from_gpt2_files(path, merges.string());
  }
  return from_json_file(path);
}

}  // namespace kiln
