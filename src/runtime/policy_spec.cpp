#include "runtime/policy_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "core/error.h"

namespace ts {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

template <typename T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

bool is_file_option(std::string_view key) { return key == "profile" || key == "predictor"; }

PolicySpec PolicySpec::parse(std::string_view text) {
  // Errors quote the spec: a control character in it (never part of a name, option or path) would
  // break the one-line message, so it is refused first, by position.
  const auto control = std::find_if(text.begin(), text.end(),
                                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  TS_CHECK(control == text.end(), "policy spec: control character 0x", std::hex,
           int(static_cast<unsigned char>(*control)), std::dec, " at byte ", control - text.begin());
  PolicySpec spec;
  const size_t colon = text.find(':');
  spec.name = std::string(text.substr(0, colon));
  TS_CHECK(!spec.name.empty(), "policy '", text, "': no name (expected NAME or NAME:KEY=VALUE,...)");
  if (colon == std::string_view::npos) return spec;
  TS_CHECK(colon + 1 < text.size(), "policy '", text, "': nothing after ':'");
  for (std::string_view item : split(text.substr(colon + 1), ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      TS_CHECK(!spec.options.empty() && !item.empty(), "policy '", text, "': '", item,
               "' is not KEY=VALUE (lists continue a value: layers=3,5,7)");
      spec.options.back().second += cat(",", item);
      continue;
    }
    const std::string key(item.substr(0, eq));
    TS_CHECK(!key.empty(), "policy '", text, "': option without a name");
    TS_CHECK(item.find('=', eq + 1) == std::string_view::npos, "policy '", text, "': '", item,
             "' has more than one '='");
    for (const auto& [k, v] : spec.options)
      TS_CHECK(k != key, "policy '", text, "': option ", key, " given twice");
    spec.options.emplace_back(key, std::string(item.substr(eq + 1)));
  }
  return spec;
}

std::string PolicySpec::text() const {
  std::string s = name;
  for (size_t i = 0; i < options.size(); ++i)
    s += cat(i ? "," : ":", options[i].first, "=", options[i].second);
  return s;
}

void PolicyOptions::bad_value(std::string_view key, const std::string& value, std::string_view want) const {
  fail("policy ", spec_.name, ": option ", key, "=", value, " is not ", want);
}

PolicyOption number_option(std::string key, double min, double max, std::string fallback, std::string help) {
  return {std::move(key), OptionType::Number, std::move(fallback), std::move(help), min, max, {}};
}
PolicyOption integer_option(std::string key, uint64_t min, uint64_t max, std::string fallback,
                            std::string help) {
  return {std::move(key),
          OptionType::Integer,
          std::move(fallback),
          std::move(help),
          double(min),
          double(max),
          {}};
}
PolicyOption choice_option(std::string key, std::vector<std::string> choices, std::string help) {
  std::string first = choices.at(0);
  return {std::move(key), OptionType::Choice, std::move(first), std::move(help), 0, 0, std::move(choices)};
}
PolicyOption list_option(std::string key, std::string help) {
  return {std::move(key), OptionType::List, "", std::move(help), 0, 0, {}};
}
PolicyOption path_option(std::string key, std::string help) {
  if (!is_file_option(key)) throw std::logic_error("policy option '" + key + "' is not a file option");
  return {std::move(key), OptionType::Path, "", std::move(help), 0, 0, {}};
}
PolicyOption text_option(std::string key, std::string fallback, std::string help) {
  return {std::move(key), OptionType::Text, std::move(fallback), std::move(help), 0, 0, {}};
}
PolicyOptionList operator+(PolicyOptionList a, const PolicyOptionList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const char* PolicyOption::type_name() const {
  switch (type) {
    case OptionType::Number:
      return "number";
    case OptionType::Integer:
      return "integer";
    case OptionType::Choice:
      return "choice";
    case OptionType::List:
      return "list";
    case OptionType::Path:
      return "path";
    case OptionType::Text:
      return "text";
  }
  return "text";
}

std::string PolicyOption::usage() const {
  switch (type) {
    case OptionType::Choice: {
      std::string names;
      for (const std::string& c : choices) names += (names.empty() ? "" : "|") + c;
      return key + "=" + names;
    }
    case OptionType::List:
      return key + "=LIST";
    case OptionType::Path:
      return key + "=FILE";
    default:
      return key + "=" + (fallback.empty() ? (type == OptionType::Number ? "F" : "N") : fallback);
  }
}

std::pair<const PolicyOption*, std::optional<std::string>> PolicyOptions::read(std::string_view key,
                                                                               OptionType type) {
  const auto d =
      std::find_if(declared_.begin(), declared_.end(), [&](const PolicyOption& o) { return o.key == key; });
  if (d == declared_.end() || d->type != type)
    throw std::logic_error(cat("policy ", spec_.name, " reads option '", key, "' as it is not declared"));
  read_.emplace_back(key);
  for (auto& [k, v] : spec_.options) {
    if (k != key) continue;
    if (v.empty()) bad_value(key, v, "a value");
    return {&*d, v};
  }
  if (d->fallback.empty()) return {&*d, std::nullopt};
  return {&*d, d->fallback};
}

std::optional<std::string> PolicyOptions::text(std::string_view key) {
  return read(key, OptionType::Text).second;
}
std::optional<std::string> PolicyOptions::path(std::string_view key) {
  return read(key, OptionType::Path).second;
}

std::optional<double> PolicyOptions::number(std::string_view key) {
  const auto [d, v] = read(key, OptionType::Number);
  if (!v) return std::nullopt;
  const std::optional<double> x = parse_number<double>(*v);
  if (!x || !std::isfinite(*x) || *x < d->min || *x > d->max)
    bad_value(key, *v, cat("a number in [", d->min, ", ", d->max, "]"));
  return *x;
}

std::optional<uint64_t> PolicyOptions::integer(std::string_view key) {
  const auto [d, v] = read(key, OptionType::Integer);
  if (!v) return std::nullopt;
  const std::optional<uint64_t> x = parse_number<uint64_t>(*v);
  // The range is declared as doubles; UINT64_MAX itself rounds up, so compare in long double.
  if (!x || static_cast<long double>(*x) < d->min || static_cast<long double>(*x) > d->max)
    bad_value(key, *v,
              cat("an integer in [", static_cast<uint64_t>(d->min), ", ",
                  d->max >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(d->max), "]"));
  return *x;
}

size_t PolicyOptions::choice_index(std::string_view key, size_t n_values) {
  const auto [d, v] = read(key, OptionType::Choice);
  if (d->choices.size() != n_values)
    throw std::logic_error(cat("policy ", spec_.name, " maps ", n_values, " values to the ",
                               d->choices.size(), " choices of '", key, "'"));
  const auto c = std::find(d->choices.begin(), d->choices.end(), *v);
  if (c == d->choices.end()) bad_value(key, *v, "one of " + d->usage().substr(d->key.size() + 1));
  return static_cast<size_t>(c - d->choices.begin());
}

std::optional<std::vector<uint32_t>> PolicyOptions::list(std::string_view key) {
  const std::optional<std::string> v = read(key, OptionType::List).second;
  if (!v) return std::nullopt;
  std::vector<uint32_t> xs;
  for (std::string_view item : split(*v, ',')) {
    const size_t dash = item.find('-');
    const std::optional<uint32_t> lo = parse_number<uint32_t>(item.substr(0, dash));
    const std::optional<uint32_t> hi =
        dash == std::string_view::npos ? lo : parse_number<uint32_t>(item.substr(dash + 1));
    if (!lo || !hi || *hi < *lo || *hi - *lo > (1u << 20))
      bad_value(key, *v, "a list of integers and ranges like 3,5,8-11");
    for (uint32_t x = *lo; x <= *hi; ++x) xs.push_back(x);
  }
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  return xs;
}

void PolicyOptions::finish() const {
  for (const auto& option : spec_.options) {  // not a structured binding: clang 14 cannot capture those
    const std::string& k = option.first;
    if (std::find(read_.begin(), read_.end(), k) != read_.end()) continue;
    TS_CHECK(
        std::none_of(declared_.begin(), declared_.end(), [&](const PolicyOption& o) { return o.key == k; }),
        "policy ", spec_.name, ": option ", k, "= has no effect with the other options given");
    std::string known;
    for (const PolicyOption& o : declared_) known += cat(known.empty() ? "" : ", ", o.key);
    fail("policy ", spec_.name, ": unknown option '", k, "' (",
         known.empty() ? "it takes no options" : "options: " + known, ")");
  }
}

}  // namespace ts
