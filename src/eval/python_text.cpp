#include "eval/python_text.h"

namespace ts::py {
namespace {

// str.isspace() for ASCII: space, \t \n \v \f \r and the separators \x1c..\x1f.
bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

char to_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }
char to_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return rstrip(s);
}

std::string_view rstrip(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string capitalize(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) out[i] = i == 0 ? to_upper(out[i]) : to_lower(out[i]);
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) return out.append(s.substr(pos));
    out.append(s.substr(pos, hit - pos)).append(to);
    pos = hit + from.size();
  }
}

size_t length(std::string_view utf8) {
  size_t n = 0;
  for (const char c : utf8) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // not a continuation byte
  return n;
}

}  // namespace ts::py
