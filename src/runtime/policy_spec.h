#pragma once
// Policy specifications as given on the command line: NAME or NAME:KEY=VALUE,KEY=VALUE,...
// A comma-separated item without '=' continues the previous value, so lists need no quoting:
// "orthorank:ratio=0.333,layers=3,5,7" gives layers the value "3,5,7".
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ts {

// Option keys whose values are paths of files a policy reads (layer profiles, predictors). Policies
// take them with take_path; a server checks them in requests, so a remote client cannot make it
// open arbitrary files.
bool is_file_option(std::string_view key);

struct PolicySpec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;  // in the order given

  // Throws ts::Error naming the spec on empty names, empty keys, repeated keys or stray '='.
  static PolicySpec parse(std::string_view text);
  std::string text() const;  // NAME:KEY=VALUE,... again
};

// Typed access to a spec's options for the policy being built. Every take_* marks its key as
// known; finish() rejects the options no take_* asked for, listing the known ones.
class PolicyOptions {
 public:
  explicit PolicyOptions(PolicySpec spec) : spec_(std::move(spec)) {}
  const PolicySpec& spec() const { return spec_; }

  std::optional<std::string> take_string(std::string_view key);
  // take_string for a key of is_file_option (a logic error otherwise).
  std::optional<std::string> take_path(std::string_view key);
  // Absent: nullopt; present but not a number in [min, max]: an error.
  std::optional<double> take_double(std::string_view key, double min, double max);
  std::optional<uint64_t> take_uint(std::string_view key, uint64_t min, uint64_t max);
  // Comma-separated numbers and inclusive ranges ("3,5,8-11"); returned ascending, without repeats.
  std::optional<std::vector<uint32_t>> take_uint_list(std::string_view key);
  // One of `choices` by name; absent: the first.
  template <typename E>
  E take_choice(std::string_view key, std::initializer_list<std::pair<const char*, E>> choices) {
    const std::optional<std::string> v = take_string(key);
    if (!v) return choices.begin()->second;
    std::string names;
    for (const auto& [name, value] : choices) {
      if (*v == name) return value;
      names += (names.empty() ? "" : "|") + std::string(name);
    }
    bad_value(key, *v, "one of " + names);
  }
  void finish() const;

 private:
  const std::string* find(std::string_view key);
  [[noreturn]] void bad_value(std::string_view key, const std::string& value, std::string_view want) const;

  PolicySpec spec_;
  std::vector<std::string> known_;
};

}  // namespace ts
