// Python's str operations over UTF-8 text, as chat templates call them:
// Python strings index, slice and measure by code point, and strip, split and
// change case by Unicode rules, so the bytes kiln keeps are read as code points.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data::jinja {

// The code point at s[i]; `len` gets its length in bytes. A malformed or
// cut-off sequence is one byte, read as the code point of the byte's value,
// so any bytes are safe to walk.
char32_t decode_at(std::string_view s, size_t i, size_t& len);

// str.isspace() of one code point (also what `\s` matches in Python's re).
bool py_isspace(char32_t c);

// The byte offset where each code point of `s` starts, plus s.size() at the
// end.
std::vector<size_t> code_point_starts(std::string_view s);

// The code points of `s`, each as its UTF-8 text.
std::vector<std::string> code_points(std::string_view s);

// str.strip / lstrip / rstrip: `chars` unset strips whitespace, else any of
// the code points in *chars.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right);

// str.split(sep, maxsplit): no `sep` splits on runs of whitespace and drops
// empty pieces; maxsplit < 0 means no limit.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  long maxsplit);

// str.replace(old, new, count); count < 0 replaces all.
std::string py_replace(std::string_view s, std::string_view old, std::string_view with, long count);

// str.upper(), str.lower(): full Unicode case mapping ("ß".upper() is "SS").
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
// str.title(): a cased letter after a cased letter is lowered, any other titled.
std::string py_title(std::string_view s);
// str.capitalize(): the first code point titled, the rest lowered.
std::string py_capitalize(std::string_view s);
// Jinja's `title` filter (not str.title()): the first code point of each word
// upper-cased, the rest lowered; words end at whitespace and any of "-({[<".
std::string jinja_title(std::string_view s);

// Python's repr() of a str: single quotes unless the text holds ' and no ",
// backslash escapes for the quote, backslash and unprintable code points.
std::string py_str_repr(std::string_view s);

}  // namespace kiln::data::jinja
