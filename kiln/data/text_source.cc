#include "kiln/data/text_source.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/data/utf8.h"

namespace kiln::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSplitNames[] = {"file", "paragraph", "line", "delimiter"};
constexpr const char* kFormatNames[] = {"auto", "text", "jsonl", "shards"};

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

std::string_view strip_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// Calls f(line, begin, end) for each line of `s` ([begin, end) excludes the '\n').
template <class F>
void for_each_line(std::string_view s, F&& f) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t nl = s.find('\n', begin);
    size_t end = nl == std::string_view::npos ? s.size() : nl;
    f(s.substr(begin, end - begin), begin, end);
    begin = end + 1;
  }
}

// Documents made of runs of lines, a run ending where `is_break(line)`:
// each document spans its first to its last non-blank line (without the
// final line break).
template <class IsBreak, class Fn>
void split_runs(std::string_view s, IsBreak&& is_break, Fn&& fn) {
  size_t first = std::string_view::npos, last = 0;
  auto flush = [&] {
    if (first != std::string_view::npos) fn(strip_cr(s.substr(first, last - first)));
    first = std::string_view::npos;
  };
  for_each_line(s, [&](std::string_view line, size_t begin, size_t end) {
    if (is_break(line)) return flush();
    if (blank(line)) return;
    if (first == std::string_view::npos) first = begin;
    last = end;
  });
  flush();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in, "cannot read data file '", path, "'");
  std::ostringstream os;
  os << in.rdbuf();
  KILN_CHECK(!in.bad(), "error reading data file '", path, "'");
  return std::move(os).str();
}

bool has_jsonl_extension(const std::string& path) {
  return fs::path(path).extension() == ".jsonl";
}

}  // namespace

TextSplit parse_text_split(std::string_view name) {
  for (int i = 0; i < 4; ++i)
    if (name == kSplitNames[i]) return TextSplit(i);
  fail("unknown text split '", name, "': expected file, paragraph, line or delimiter");
}
const char* text_split_name(TextSplit split) { return kSplitNames[int(split)]; }
std::vector<std::string> text_split_names() { return {std::begin(kSplitNames), std::end(kSplitNames)}; }

SourceFormat parse_source_format(std::string_view name) {
  for (int i = 0; i < 4; ++i)
    if (name == kFormatNames[i]) return SourceFormat(i);
  fail("unknown data format '", name, "': expected auto, text, jsonl or shards");
}
const char* source_format_name(SourceFormat format) { return kFormatNames[int(format)]; }
std::vector<std::string> source_format_names() {
  return {std::begin(kFormatNames), std::end(kFormatNames)};
}

std::vector<std::string> list_source_files(const std::vector<std::string>& paths) {
  KILN_CHECK(!paths.empty(), "no data path given");
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    auto st = fs::status(p, ec);
    KILN_CHECK(fs::exists(st), "data path '", p, "' does not exist");
    if (!fs::is_directory(st)) {
      // A device or pipe may never end (/dev/zero grew memory without bound).
      KILN_CHECK(fs::is_regular_file(st), "data path '", p,
                 "' is neither a file nor a folder (a device, pipe or socket); kiln reads "
                 "training data from files");
      files.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (auto it = fs::recursive_directory_iterator(p); it != fs::recursive_directory_iterator();
         ++it) {
      if (it->path().filename().string().starts_with(".")) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) found.push_back(it->path().string());
    }
    KILN_CHECK(!found.empty(), "data folder '", p, "' holds no files");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

void split_documents(std::string_view contents, const std::string& origin, bool jsonl,
                     const TextSourceOptions& options,
                     const std::function<void(std::string_view)>& fn) {
  if (jsonl) {
    int64_t line_no = 0;
    for_each_line(contents, [&](std::string_view line, size_t, size_t) {
      ++line_no;
      if (blank(line)) return;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        fail(origin, ":", line_no, ": not valid JSON (", e.what(), ")");
      }
      KILN_CHECK(j.is_object(), origin, ":", line_no, ": expected a JSON object per line");
      auto it = j.find(options.text_key);
      KILN_CHECK(it != j.end() && it->is_string(), origin, ":", line_no,
                 ": no string field '", options.text_key,
                 "' (name the key: --data.text_key for kiln train, --text-key for kiln data "
                 "prepare)");
      const auto& text = it->get_ref<const std::string&>();
      if (!text.empty()) fn(text);
    });
    return;
  }
  size_t bad = find_invalid_utf8(contents);
  KILN_CHECK(bad == std::string_view::npos, origin, ": invalid UTF-8 at byte ", bad,
             "; convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
  switch (options.text_split) {
    case TextSplit::file:
      if (!blank(contents)) fn(contents);
      break;
    case TextSplit::line:
      for_each_line(contents, [&](std::string_view line, size_t, size_t) {
        line = strip_cr(line);
        if (!blank(line)) fn(line);
      });
      break;
    case TextSplit::paragraph:
      split_runs(contents, [](std::string_view line) { return blank(line); }, fn);
      break;
    case TextSplit::delimiter:
      split_runs(
          contents, [&](std::string_view line) { return strip_cr(line) == options.delimiter; }, fn);
      break;
  }
}

void for_each_document(const std::vector<std::string>& files, const TextSourceOptions& options,
                       const std::function<void(std::string_view)>& fn,
                       const std::function<void(uint64_t)>& progress) {
  KILN_CHECK(options.format != SourceFormat::shards,
             "for_each_document reads raw text; shards are read with read_prepared");
  for (const auto& file : files) {
    std::string contents = read_file(file);
    bool jsonl = options.format == SourceFormat::jsonl ||
                 (options.format == SourceFormat::automatic && has_jsonl_extension(file));
    split_documents(contents, file, jsonl, options, fn);
    if (progress) progress(contents.size());
  }
}

}  // namespace kiln::data
