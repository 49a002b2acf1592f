#pragma once
// Finds special and user-defined token texts in raw input, leftmost-longest, the way HF
// tokenizers' added-vocabulary matcher (Aho-Corasick, LeftmostLongest) does.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ts {

class SpecialMatcher {
 public:
  struct Match {
    int32_t id;
    size_t len;
    bool special;  // control/unknown token: only split out when the caller parses specials
  };

  SpecialMatcher();
  void add(std::string_view text, int32_t id, bool special);
  // The longest added text starting at text[pos], if any.
  std::optional<Match> match_at(std::string_view text, size_t pos) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // byte -> node
    int32_t id = -1;
    bool special = false;
  };
  int32_t child(int32_t node, uint8_t b) const;

  std::vector<Node> nodes_;
  std::array<int32_t, 256> root_;  // first byte -> node, -1 if no text starts with it
};

}  // namespace ts
