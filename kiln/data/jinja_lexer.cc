#include "kiln/data/jinja_lexer.h"

#include <cctype>

#include "kiln/data/jinja_error.h"
#include "kiln/data/jinja_strings.h"
#include "kiln/data/utf8.h"

namespace kiln::data::jinja {

namespace {

// Longest first, so "//" is not read as two "/".
constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                           "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                           ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "\r\n" and "\r" become "\n", and one trailing newline goes
// (jinja2's keep_trailing_newline=False).
std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\r') out += s[i];
    else if (i + 1 < s.size() && s[i + 1] == '\n') continue;  // the "\n" follows
    else out += '\n';
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool all_space(std::string_view s) {
  for (size_t i = 0, len = 0; i < s.size(); i += len)
    if (!py_isspace(decode_at(s, i, len))) return false;
  return true;
}

// `s` without the whitespace at its end (Python's str.rstrip()).
std::string_view rstrip_space(std::string_view s) {
  std::vector<size_t> at = code_point_starts(s);
  size_t n = at.size() - 1, len = 0;
  while (n > 0 && py_isspace(decode_at(s, at[n - 1], len))) --n;
  return s.substr(0, at[n]);
}

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& name) : src_(normalize_newlines(source)), name_(name) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t tag = next_tag();
      if (tag == std::string::npos) {
        emit(Token::Kind::text, src_.substr(pos_), line_);
        break;
      }
      char kind = src_[tag + 1];
      char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      text_before(tag, kind, sign);
      int tag_line = line_;
      advance_to(tag + 2 + (sign ? 1 : 0));
      if (kind == '#') comment(tag_line);
      else tag_contents(kind == '%', tag_line);
    }
    out_.push_back({Token::Kind::eof, "", line_});
    return std::move(out_);
  }

 private:
  size_t next_tag() const {
    for (size_t at = src_.find('{', pos_); at != std::string::npos; at = src_.find('{', at + 1))
      if (at + 1 < src_.size() && (src_[at + 1] == '{' || src_[at + 1] == '%' || src_[at + 1] == '#')) return at;
    return std::string::npos;
  }

  // The text from pos_ to the tag at `tag`, whitespace control applied.
  void text_before(size_t tag, char kind, char sign) {
    std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);
    if (sign == '-') {
      text = rstrip_space(text);
    } else if (sign != '+' && kind != '{') {  // lstrip_blocks, which skips {{ }}
      size_t line_start = text.rfind('\n') + 1;  // 0 when there is no newline
      bool at_line_start = line_start > 0 || pos_ == 0 || src_[pos_ - 1] == '\n';
      if (at_line_start && all_space(text.substr(line_start))) text = text.substr(0, line_start);
    }
    if (!text.empty()) emit(Token::Kind::text, std::string(text), line_);
    advance_to(tag);
  }

  void comment(int tag_line) {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail_at(name_, tag_line, "unterminated comment: no #}");
    char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    advance_to(end + 2);
    after_tag_end(sign, true);
  }

  // After a tag's end: `-` drops all whitespace, `+` keeps it, and a block or
  // comment tag drops one newline (trim_blocks).
  void after_tag_end(char sign, bool trim_newline) {
    if (sign == '-') {
      size_t len = 0;
      while (pos_ < src_.size() && py_isspace(decode_at(src_, pos_, len))) advance_to(pos_ + len);
    } else if (sign != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void tag_contents(bool block, int tag_line) {
    if (block) refuse_raw();
    emit(block ? Token::Kind::block_begin : Token::Kind::print_begin, "", tag_line);
    std::string_view end = block ? "%}" : "}}";
    int depth = 0;  // open brackets: "}}" inside {'a': {'b': 1}} closes nothing
    for (;;) {
      skip_space();
      if (pos_ >= src_.size()) fail_at(name_, tag_line, "unterminated tag: no ", end);
      if (depth == 0) {
        char sign = src_[pos_] == '-' || src_[pos_] == '+' ? src_[pos_] : 0;
        if (src_.compare(pos_ + (sign ? 1 : 0), 2, end) == 0 && (block || sign != '+')) {
          emit(block ? Token::Kind::block_end : Token::Kind::print_end, "", line_);
          advance_to(pos_ + 2 + (sign ? 1 : 0));
          after_tag_end(sign, block);
          return;
        }
      }
      char c = src_[pos_];
      if (is_digit(c)) number();
      else if (is_name_start(c)) name();
      else if (c == '\'' || c == '"') string();
      else op(depth);
    }
  }

  void refuse_raw() {
    size_t at = pos_;
    while (at < src_.size() && (src_[at] == ' ' || src_[at] == '\t' || src_[at] == '\n')) ++at;
    if (src_.compare(at, 3, "raw") == 0 && (at + 3 >= src_.size() || !is_name_char(src_[at + 3])))
      fail_at(name_, line_, "unsupported tag 'raw'");
  }

  void skip_space() {
    size_t len = 0;
    while (pos_ < src_.size() && py_isspace(decode_at(src_, pos_, len))) advance_to(pos_ + len);
  }

  void name() {
    size_t end = pos_;
    while (end < src_.size() && is_name_char(src_[end])) ++end;
    emit(Token::Kind::name, src_.substr(pos_, end - pos_), line_);
    advance_to(end);
  }

  // jinja2's integer and float literals: 1_000, 0x1F, 0o17, 0b11, 1.5, 1e3.
  void number() {
    auto digits = [&](size_t at, auto is_valid) {
      while (at < src_.size() && (is_valid(src_[at]) || (src_[at] == '_' && at + 1 < src_.size() && is_valid(src_[at + 1]))))
        ++at;
      return at;
    };
    auto decimal = [](char c) { return is_digit(c); };
    size_t end;
    Token::Kind kind = Token::Kind::integer;
    char base = pos_ + 1 < src_.size() && src_[pos_] == '0' ? char(std::tolower(static_cast<unsigned char>(src_[pos_ + 1]))) : 0;
    if (base == 'x' || base == 'o' || base == 'b') {
      end = digits(pos_ + 2, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
    } else {
      end = digits(pos_, decimal);
      if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1]))
        end = digits(end + 1, decimal), kind = Token::Kind::number;
      size_t exp = end + 1 < src_.size() && (src_[end + 1] == '+' || src_[end + 1] == '-') ? end + 2 : end + 1;
      if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E') && exp < src_.size() && is_digit(src_[exp]))
        end = digits(exp, decimal), kind = Token::Kind::number;
    }
    emit(kind, src_.substr(pos_, end - pos_), line_);
    advance_to(end);
  }

  // A quoted literal, its escapes decoded as Python's "unicode-escape" codec
  // does (what jinja2 applies).
  void string() {
    char quote = src_[pos_];
    int start_line = line_;
    std::string value;
    size_t at = pos_ + 1;
    auto hex = [&](size_t n) {
      if (at + n > src_.size()) fail_at(name_, start_line, "truncated \\x, \\u or \\U escape in a string");
      char32_t c = 0;
      for (size_t k = 0; k < n; ++k, ++at) {
        char h = src_[at];
        if (!std::isxdigit(static_cast<unsigned char>(h)))
          fail_at(name_, start_line, "truncated \\x, \\u or \\U escape in a string");
        c = c * 16 + char32_t(is_digit(h) ? h - '0' : std::tolower(h) - 'a' + 10);
      }
      if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        fail_at(name_, start_line, "a string escape names a surrogate or a code point past U+10FFFF");
      append_utf8(value, c);
    };
    for (;;) {
      if (at >= src_.size()) fail_at(name_, start_line, "unterminated string literal");
      char c = src_[at++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (at >= src_.size()) fail_at(name_, start_line, "unterminated string literal");
      char e = src_[at++];
      switch (e) {
        case '\n': break;  // a line continuation
        case '\\': case '\'': case '"': value += e; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'v': value += '\v'; break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        case 'N': fail_at(name_, start_line, "unsupported escape \\N{...} in a string");
        default:
          if (e >= '0' && e <= '7') {  // up to three octal digits
            char32_t v = char32_t(e - '0');
            for (int k = 0; k < 2 && at < src_.size() && src_[at] >= '0' && src_[at] <= '7'; ++k)
              v = v * 8 + char32_t(src_[at++] - '0');
            append_utf8(value, v);
          } else {  // Python keeps an unknown escape as written
            value += '\\';
            value += e;
          }
      }
    }
    emit(Token::Kind::string, std::move(value), start_line);
    advance_to(at);
  }

  void op(int& depth) {
    for (std::string_view o : kOperators) {
      if (src_.compare(pos_, o.size(), o) != 0) continue;
      if (o == "(" || o == "[" || o == "{") ++depth;
      if (o == ")" || o == "]" || o == "}") {
        if (depth == 0) fail_at(name_, line_, "unexpected '", o, "'");
        --depth;
      }
      emit(Token::Kind::op, std::string(o), line_);
      advance_to(pos_ + o.size());
      return;
    }
    size_t len = 0;
    decode_at(src_, pos_, len);
    fail_at(name_, line_, "unexpected character '", src_.substr(pos_, len), "' in a tag");
  }

  void emit(Token::Kind kind, std::string text, int line) { out_.push_back({kind, std::move(text), line}); }

  void advance_to(size_t to) {
    for (; pos_ < to; ++pos_)
      if (src_[pos_] == '\n') ++line_;
  }

  std::string src_;
  const std::string& name_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const std::string& template_name) {
  return Lexer(source, template_name).run();
}

}  // namespace kiln::data::jinja
