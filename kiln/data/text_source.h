// Raw text sources: plain-text files and JSONL files, given as files or
// folders. Folders are walked recursively and their files taken in sorted
// (byte-wise) path order, so the same paths always give the same documents
// in the same order. Hidden files and folders (".name") are skipped.
//
// Plain text becomes documents by `text_split`: "file" (each file is one
// document), "paragraph" (runs of text separated by blank lines), "line"
// (each non-empty line) or "delimiter" (text between lines equal to
// `delimiter`, e.g. "%" in fortune files). Empty documents are skipped.
// Text must be UTF-8: invalid bytes are an error naming the file and offset. A JSONL file is one document per line: the string
// field `text_key` of each object; blank lines are skipped, and a line that is
// not an object with that string field is an error naming the file and line.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data {

enum class TextSplit { file, paragraph, line, delimiter };
// "file" | "paragraph" | "line" | "delimiter"; anything else is a kiln::Error listing them.
TextSplit parse_text_split(std::string_view name);
const char* text_split_name(TextSplit split);
std::vector<std::string> text_split_names();  // what parse_text_split accepts

enum class SourceFormat { automatic, text, jsonl, shards };
// "auto" | "text" | "jsonl" | "shards".
SourceFormat parse_source_format(std::string_view name);
const char* source_format_name(SourceFormat format);
std::vector<std::string> source_format_names();  // what parse_source_format accepts

struct TextSourceOptions {
  // auto: "*.jsonl" files are JSONL, every other file plain text.
  SourceFormat format = SourceFormat::automatic;
  std::string text_key = "text";
  TextSplit text_split = TextSplit::file;
  std::string delimiter = "%";  // TextSplit::delimiter's separator line
};

// Every file under `paths` (files as given, folders recursively, each
// folder's files sorted), in order. A missing path, or none resolving to a
// file, is a kiln::Error naming it.
std::vector<std::string> list_source_files(const std::vector<std::string>& paths);

// Calls `fn(text)` for every document of `files`, in order; `progress(bytes)`
// (when given) after each file with the number of bytes of it read.
void for_each_document(const std::vector<std::string>& files, const TextSourceOptions& options,
                       const std::function<void(std::string_view text)>& fn,
                       const std::function<void(uint64_t bytes)>& progress = {});

// The documents of one file's contents (`origin` names it in errors).
void split_documents(std::string_view contents, const std::string& origin, bool jsonl,
                     const TextSourceOptions& options,
                     const std::function<void(std::string_view text)>& fn);

}  // namespace kiln::data
