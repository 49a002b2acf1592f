#pragma once
// Stop sequences over streamed text: text that might be the start of a stop sequence is held back
// until the next piece shows whether it is, so no part of a stop sequence is ever emitted.
#include <string>
#include <string_view>
#include <vector>

namespace ts::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops = {}) : stops_(std::move(stops)) {}

  // Appends generated text; returns the text now safe to emit. Once a stop sequence appears,
  // stopped() is true and the text from it on is dropped.
  std::string push(std::string_view text);
  // The held-back tail, when generation ends without a stop sequence.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ts::server
