#include "model/unicode.h"

#include <algorithm>
#include <array>

namespace ts::unicode {
namespace {

// Valid second-byte range per lead byte (Unicode Table 3-7); later bytes are always 80..BF.
struct LeadInfo {
  uint8_t len, lo, hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

bool continuation_ok(const LeadInfo& info, size_t index, uint8_t b) {
  return index == 1 ? (b >= info.lo && b <= info.hi) : (b >= 0x80 && b <= 0xBF);
}

std::array<uint8_t, 128> ascii_flags() {
  std::array<uint8_t, 128> t{};
  for (uint32_t c = 0; c < 128; ++c) {
    const CodepointRun* end = kCodepointRuns + kCodepointRunCount;
    auto it = std::upper_bound(kCodepointRuns, end, c,
                               [](uint32_t v, const CodepointRun& r) { return v < r.first; });
    t[c] = (it - 1)->flags;
  }
  return t;
}

}  // namespace

uint8_t flags(uint32_t cp) {
  static const std::array<uint8_t, 128> ascii = ascii_flags();
  if (cp < 128) return ascii[cp];
  if (cp > 0x10FFFF) return 0;
  const CodepointRun* end = kCodepointRuns + kCodepointRunCount;
  auto it = std::upper_bound(kCodepointRuns, end, cp,
                             [](uint32_t v, const CodepointRun& r) { return v < r.first; });
  return (it - 1)->flags;
}

Utf8Char decode(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  const LeadInfo info = lead_info(b0);
  if (info.len == 1) return {b0, 1};
  if (info.len == 0 || pos + info.len > s.size()) return {kInvalid, 1};
  uint32_t cp = b0 & (0x7F >> info.len);
  for (size_t i = 1; i < info.len; ++i) {
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if (!continuation_ok(info, i, b)) return {kInvalid, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, info.len};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t incomplete_tail(std::string_view s) {
  // A proper prefix is a lead byte followed by fewer continuation bytes than it needs.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t start = s.size() - back;
    const LeadInfo info = lead_info(static_cast<uint8_t>(s[start]));
    if (info.len == 0) continue;  // continuation byte (or invalid): look further back
    if (info.len <= back) return 0;
    for (size_t i = 1; i < back; ++i) {
      if (!continuation_ok(info, i, static_cast<uint8_t>(s[start + i]))) return 0;
    }
    return back;
  }
  return 0;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char ch = decode(s, pos);
    if (ch.cp == kInvalid) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(s.substr(pos, ch.len));
    }
    pos += ch.len;
  }
  return out;
}

}  // namespace ts::unicode
