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

// One option of a policy, declared once: the parser checks values against it, and the CLI help,
// the server's policy list, the Python classes' signatures and the README's table are made from it.
enum class OptionType { Number, Integer, Choice, List, Path, Text };
struct PolicyOption {
  std::string key;
  OptionType type = OptionType::Text;
  std::string fallback;  // the value when absent, as a spec writes it; "" = unset (or derived)
  std::string help;
  double min = 0, max = 0;           // Number, Integer: the accepted range
  std::vector<std::string> choices;  // Choice: the accepted names; absent means the first

  // "ratio=0.333", "select=ortho|reverse|random", "layers=LIST": how a spec writes it.
  std::string usage() const;
  const char* type_name() const;  // "number", "integer", "choice", "list", "path", "text"
};
using PolicyOptionList = std::vector<PolicyOption>;

PolicyOption number_option(std::string key, double min, double max, std::string fallback, std::string help);
PolicyOption integer_option(std::string key, uint64_t min, uint64_t max, std::string fallback,
                            std::string help);
PolicyOption choice_option(std::string key, std::vector<std::string> choices, std::string help);
PolicyOption list_option(std::string key, std::string help);  // integers and ranges: 3,5,8-11
PolicyOption path_option(std::string key, std::string help);  // key must be is_file_option
PolicyOption text_option(std::string key, std::string fallback, std::string help);
// a + b, for policies whose options include a shared group (key budgets, layer choices).
PolicyOptionList operator+(PolicyOptionList a, const PolicyOptionList& b);

// Typed access to a spec's options for the policy being built, as its declarations say: each
// reader checks the value against the option's declaration and returns its fallback when the
// spec leaves it out. Reading an undeclared key, or as another type, is a logic error. finish()
// rejects undeclared options, listing the declared ones, and declared ones that went unread (an
// option of a mode not chosen, e.g. zipvl's high= without mixed=1).
class PolicyOptions {
 public:
  PolicyOptions(PolicySpec spec, PolicyOptionList declared)
      : spec_(std::move(spec)), declared_(std::move(declared)) {}
  const PolicySpec& spec() const { return spec_; }

  std::optional<double> number(std::string_view key);
  std::optional<uint64_t> integer(std::string_view key);
  // The value of the declared choice given (or of the first), values in the declaration's order.
  template <typename E>
  E choice(std::string_view key, std::initializer_list<E> values) {
    return values.begin()[choice_index(key, values.size())];
  }
  // Ascending, without repeats.
  std::optional<std::vector<uint32_t>> list(std::string_view key);
  std::optional<std::string> path(std::string_view key);
  std::optional<std::string> text(std::string_view key);
  void finish() const;

 private:
  // The declaration of key (which must be of `type`) and the given value, else its fallback.
  std::pair<const PolicyOption*, std::optional<std::string>> read(std::string_view key, OptionType type);
  size_t choice_index(std::string_view key, size_t n_values);
  [[noreturn]] void bad_value(std::string_view key, const std::string& value, std::string_view want) const;

  PolicySpec spec_;
  PolicyOptionList declared_;
  std::vector<std::string> read_;  // the keys read, so finish() can reject given options that had no effect
};

}  // namespace ts
