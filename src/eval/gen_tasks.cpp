#include "eval/gen_tasks.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "eval/data_file.h"
#include "eval/example_rng.h"
#include "eval/python_text.h"
#include "eval/rouge.h"

namespace ts {
namespace {

nlohmann::json read_json_file(const std::string& path) {
  try {
    return nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, ": invalid JSON (", e.what(), ")");
  }
}

const std::string& config_entry(const nlohmann::json& config, const std::string& path, const char* key) {
  TS_CHECK(config.is_object() && config.contains(key) && config[key].is_string(), path, ": no string entry '",
           key, "'");
  return config[key].get_ref<const std::string&>();
}

// Grid positions in visiting order: every combination of the two axes, per_cell times each.
template <typename F>
void for_each_cell(size_t n_a, size_t n_b, size_t per_cell, F&& f) {
  for (size_t a = 0; a < n_a; ++a)
    for (size_t b = 0; b < n_b; ++b)
      for (size_t r = 0; r < per_cell; ++r) f(a, b);
}

size_t depth_index(double depth, size_t n) { return static_cast<size_t>(std::lround(depth * double(n))); }

const std::vector<std::string> kKeyAdjectives = {
    "amber", "brisk", "candid", "dusty", "eager", "frosty", "gentle", "hollow", "icy",    "jolly",
    "keen",  "lunar", "misty",  "noble", "olive", "pale",   "quiet",  "rusty",  "silent", "tidy"};
const std::vector<std::string> kKeyNouns = {
    "anchor", "badger",  "canyon", "dragon", "ember",  "falcon", "glacier", "harbor", "island", "jungle",
    "kettle", "lantern", "meadow", "nebula", "orchid", "pepper", "quartz",  "river",  "saddle", "tunnel"};

constexpr std::string_view kNeedlePrompt =
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz "
    "you about the numbers afterwards.\n{context}\nWhat is the special magic number for {query} mentioned in "
    "the provided text? The special magic number for {query} mentioned in the provided text is";
constexpr size_t kNeedleAnswerTokens = 24;  // " 1234567." is 9 tokens with single-digit tokenizers

std::string join_with_needle(const std::vector<std::string>& sentences, size_t first, size_t count,
                             size_t needle_at, const std::string& needle) {
  std::string out;
  for (size_t i = 0; i <= count; ++i) {
    if (i == needle_at) out += (out.empty() ? "" : " ") + needle;
    if (i < count) out += (out.empty() ? "" : " ") + sentences[(first + i) % sentences.size()];
  }
  return out;
}

std::string uuid4(std::mt19937_64& rng) {
  const uint64_t hi = (rng() & ~0xF000ull) | 0x4000ull;        // version 4
  const uint64_t lo = (rng() & ~(3ull << 62)) | (2ull << 62);  // RFC 4122 variant
  char buf[37];
  std::snprintf(
      buf, sizeof buf, "%08llx-%04llx-%04llx-%04llx-%012llx", static_cast<unsigned long long>(hi >> 32),
      static_cast<unsigned long long>((hi >> 16) & 0xFFFF), static_cast<unsigned long long>(hi & 0xFFFF),
      static_cast<unsigned long long>(lo >> 48), static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

}  // namespace

double score_generation(const GenExample& ex, std::string_view output) {
  double best = 0;
  for (const std::string& answer : ex.answers) {
    const double s = ex.metric == GenMetric::RougeL
                         ? rouge_l(answer, output).f
                         : (output.find(answer) != std::string_view::npos ? 1.0 : 0.0);
    best = std::max(best, s);
  }
  return best;
}

std::string format_prompt(std::string_view format, const nlohmann::json& fields) {
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      out += c;
      ++i;
    } else if (c == '{') {
      const size_t close = format.find('}', i);
      TS_CHECK(close != std::string_view::npos, "prompt template: '{' without '}'");
      const std::string name(format.substr(i + 1, close - i - 1));
      TS_CHECK(fields.contains(name) && fields[name].is_string(), "prompt template: no text for field {",
               name, "}");
      out += fields[name].get<std::string>();
      i = close;
    } else {
      TS_CHECK(c != '}', "prompt template: '}' without '{'");
      out += c;
    }
  }
  return out;
}

std::vector<GenExample> load_multi_news(const std::string& data_dir) {
  const std::string prompts_path = data_dir + "/longbench/config/dataset2prompt.json";
  const std::string maxlen_path = data_dir + "/longbench/config/dataset2maxlen.json";
  const std::string prompt = config_entry(read_json_file(prompts_path), prompts_path, "multi_news");
  const nlohmann::json maxlen = read_json_file(maxlen_path);
  TS_CHECK(maxlen.is_object() && maxlen.contains("multi_news") && maxlen["multi_news"].is_number_unsigned(),
           maxlen_path, ": no positive integer entry 'multi_news'");
  const GenerationLimits limits{maxlen["multi_news"].get<size_t>(), false};
  std::vector<GenExample> out;
  read_jsonl(data_dir + "/longbench/multi_news.jsonl", [&](const nlohmann::json& rec, const SourceLine& at) {
    const nlohmann::json fields = {{"context", string_field(rec, "context", at)},
                                   {"input", string_field(rec, "input", at)}};
    GenExample ex{format_prompt(prompt, fields), {}, limits, GenMetric::RougeL, true, {}};
    const nlohmann::json& answers = array_field(rec, "answers", at);
    for (const nlohmann::json& a : answers) {
      if (!a.is_string()) fail_at(at, "an item of 'answers' is not a string");
      ex.answers.push_back(a.get<std::string>());
    }
    if (ex.answers.empty()) fail_at(at, "'answers' is empty");
    out.push_back(std::move(ex));
  });
  return out;
}

std::vector<std::string> haystack_sentences(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = py::strip(text.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty() || line.front() == '=') continue;  // blank line or " = Heading = "
    for (size_t start = 0; start < line.size();) {
      size_t stop = line.find(". ", start);
      stop = stop == std::string_view::npos ? line.size() : stop + 1;
      const std::string_view sentence = py::strip(line.substr(start, stop - start));
      if (!sentence.empty()) out.emplace_back(sentence);
      start = stop;
    }
  }
  return out;
}

std::vector<GenExample> make_needle_examples(const std::vector<std::string>& haystack,
                                             const RetrievalGrid& grid, const TokenCounter& count_tokens) {
  TS_CHECK(!haystack.empty(), "needle: the haystack text has no sentences");
  std::vector<GenExample> out;
  for_each_cell(grid.lengths.size(), grid.depths.size(), grid.per_cell, [&](size_t li, size_t di) {
    std::mt19937_64 rng = example_rng(grid.seed, out.size());
    const std::string key = pick(rng, kKeyAdjectives) + "-" + pick(rng, kKeyNouns);
    const std::string value = std::to_string(1000000 + rng() % 9000000);
    const std::string needle = "One of the special magic numbers for " + key + " is: " + value + ".";
    const size_t first = rng() % haystack.size();
    const size_t length = grid.lengths[li];
    const auto prompt_of = [&](size_t count) {
      const size_t at = depth_index(grid.depths[di], count);
      return format_prompt(
          kNeedlePrompt, {{"context", join_with_needle(haystack, first, count, at, needle)}, {"query", key}});
    };
    const size_t fixed = count_tokens(prompt_of(0));
    TS_CHECK(fixed + kNeedleAnswerTokens <= length, "needle: a length of ", length,
             " tokens leaves no room for filler text");
    // Fill by the sentences' own token counts, then drop sentences while the whole prompt (whose
    // joins can tokenize differently) is over budget.
    size_t count = 0;
    for (size_t used = fixed;; ++count) {  // a haystack shorter than the length is repeated
      used += count_tokens(haystack[(first + count) % haystack.size()]);
      if (used + kNeedleAnswerTokens > length) break;
    }
    std::string prompt = prompt_of(count);
    while (count > 0 && count_tokens(prompt) + kNeedleAnswerTokens > length) prompt = prompt_of(--count);
    out.push_back({std::move(prompt),
                   {value},
                   {kNeedleAnswerTokens, true},
                   GenMetric::Contains,
                   false,
                   {{"length", length}, {"depth", grid.depths[di]}}});
  });
  return out;
}

std::vector<GenExample> make_kv_examples(const RetrievalGrid& grid) {
  std::vector<GenExample> out;
  for_each_cell(grid.kv_pairs.size(), grid.depths.size(), grid.per_cell, [&](size_t pi, size_t di) {
    std::mt19937_64 rng = example_rng(grid.seed, out.size());
    const size_t n_pairs = grid.kv_pairs[pi];
    TS_CHECK(n_pairs > 0, "key-value retrieval: the number of pairs must be positive");
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t i = 0; i < n_pairs; ++i) {
      std::string k = uuid4(rng);
      pairs.emplace_back(std::move(k), uuid4(rng));
    }
    const auto& [key, value] = pairs[depth_index(grid.depths[di], n_pairs - 1)];
    // Lost in the Middle's kv_retrieval prompt and record formatting.
    std::string prompt =
        "Extract the value corresponding to the specified key in the JSON object below.\n\nJSON data:\n";
    for (size_t i = 0; i < n_pairs; ++i)
      prompt += (i ? " " : "{") + ("\"" + pairs[i].first + "\": \"" + pairs[i].second + "\"") +
                (i + 1 < n_pairs ? ",\n" : "}");
    prompt += "\n\nKey: \"" + key + "\"\nCorresponding value:";
    out.push_back({std::move(prompt),
                   {value},
                   {64, true},
                   GenMetric::Contains,
                   false,
                   {{"pairs", n_pairs}, {"depth", grid.depths[di]}}});
  });
  return out;
}

}  // namespace ts
