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

const std::string* PolicyOptions::find(std::string_view key) {
  known_.emplace_back(key);
  for (const auto& [k, v] : spec_.options)
    if (k == key) return &v;
  return nullptr;
}

void PolicyOptions::bad_value(std::string_view key, const std::string& value, std::string_view want) const {
  fail("policy ", spec_.name, ": option ", key, "=", value, " is not ", want);
}

std::optional<std::string> PolicyOptions::take_string(std::string_view key) {
  const std::string* v = find(key);
  if (!v) return std::nullopt;
  if (v->empty()) bad_value(key, *v, "a value");
  return *v;
}

std::optional<std::string> PolicyOptions::take_path(std::string_view key) {
  if (!is_file_option(key))
    throw std::logic_error("policy option '" + std::string(key) + "' is not a file option");
  return take_string(key);
}

std::optional<double> PolicyOptions::take_double(std::string_view key, double min, double max) {
  const std::string* v = find(key);
  if (!v) return std::nullopt;
  const std::optional<double> x = parse_number<double>(*v);
  if (!x || !std::isfinite(*x) || *x < min || *x > max)
    bad_value(key, *v, cat("a number in [", min, ", ", max, "]"));
  return *x;
}

std::optional<uint64_t> PolicyOptions::take_uint(std::string_view key, uint64_t min, uint64_t max) {
  const std::string* v = find(key);
  if (!v) return std::nullopt;
  const std::optional<uint64_t> x = parse_number<uint64_t>(*v);
  if (!x || *x < min || *x > max) bad_value(key, *v, cat("an integer in [", min, ", ", max, "]"));
  return *x;
}

std::optional<std::vector<uint32_t>> PolicyOptions::take_uint_list(std::string_view key) {
  const std::string* v = find(key);
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
  for (const auto& [k, v] : spec_.options) {
    if (std::find(known_.begin(), known_.end(), k) != known_.end()) continue;
    std::string known;
    for (const std::string& name : known_) known += cat(known.empty() ? "" : ", ", name);
    fail("policy ", spec_.name, ": unknown option '", k, "' (",
         known.empty() ? "it takes no options" : "options: " + known, ")");
  }
}

}  // namespace ts
