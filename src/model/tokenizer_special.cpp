#include "model/tokenizer_special.h"

namespace ts {

SpecialMatcher::SpecialMatcher() { root_.fill(-1); }

int32_t SpecialMatcher::child(int32_t node, uint8_t b) const {
  for (const auto& [byte, next] : nodes_[static_cast<size_t>(node)].next) {
    if (byte == b) return next;
  }
  return -1;
}

void SpecialMatcher::add(std::string_view text, int32_t id, bool special) {
  if (text.empty()) return;
  auto first = static_cast<uint8_t>(text[0]);
  if (root_[first] < 0) {
    root_[first] = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  int32_t node = root_[first];
  for (size_t i = 1; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_[static_cast<size_t>(node)].next.emplace_back(b, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  // A text listed twice keeps its last id, as the vocabulary map does.
  nodes_[static_cast<size_t>(node)].id = id;
  nodes_[static_cast<size_t>(node)].special = special;
}

std::optional<SpecialMatcher::Match> SpecialMatcher::match_at(std::string_view text, size_t pos) const {
  int32_t node = root_[static_cast<uint8_t>(text[pos])];
  std::optional<Match> best;
  for (size_t i = pos + 1; node >= 0; ++i) {
    const Node& n = nodes_[static_cast<size_t>(node)];
    if (n.id >= 0) best = Match{n.id, i - pos, n.special};
    if (i == text.size()) break;
    node = child(node, static_cast<uint8_t>(text[i]));
  }
  return best;
}

}  // namespace ts
