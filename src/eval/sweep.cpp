#include "eval/sweep.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/error.h"

namespace ts {
namespace {

std::vector<std::string> string_list(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return {};
  const nlohmann::json& v = j[key];
  TS_CHECK(v.is_array(), where, ": '", key, "' is not a list");
  std::vector<std::string> out;
  for (const nlohmann::json& item : v) {
    TS_CHECK(item.is_string(), where, ": '", key, "' holds a non-string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::string optional_string(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return {};
  TS_CHECK(j[key].is_string(), where, ": '", key, "' is not a string");
  return j[key].get<std::string>();
}

const nlohmann::json& object_list(const nlohmann::json& j, const char* key, const std::string& where) {
  static const nlohmann::json empty = nlohmann::json::array();
  if (!j.contains(key)) return empty;
  TS_CHECK(j[key].is_array(), where, ": '", key, "' is not a list");
  for (const nlohmann::json& item : j[key])
    TS_CHECK(item.is_object(), where, ": an item of '", key, "' is not an object");
  return j[key];
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// RFC 4180: fields with a comma, quote or newline are quoted, quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

SweepSpec parse_sweep_spec(const nlohmann::json& j, const std::string& path) {
  TS_CHECK(!j.is_discarded(), path, ": invalid JSON");
  TS_CHECK(j.is_object(), path, ": a sweep spec is a JSON object");
  SweepSpec spec;
  spec.model = optional_string(j, "model", path);
  spec.data_dir = optional_string(j, "data_dir", path);
  if (j.contains("threads")) {
    TS_CHECK(j["threads"].is_number_unsigned(), path, ": 'threads' is not a non-negative integer");
    spec.threads = j["threads"].get<int>();
  }
  spec.tasks = string_list(j, "tasks", path);
  for (const nlohmann::json& p : object_list(j, "policies", path)) {
    SweepPolicy row{optional_string(p, "label", path), string_list(p, "specs", path), std::nullopt,
                    optional_string(p, "baseline", path)};
    if (p.contains("sparsity")) {
      TS_CHECK(p["sparsity"].is_number(), path, ": 'sparsity' is not a number");
      row.sparsity = p["sparsity"].get<double>();
    }
    spec.policies.push_back(std::move(row));
  }
  for (const nlohmann::json& s : object_list(j, "settings", path))
    spec.settings.push_back({optional_string(s, "label", path), string_list(s, "args", path)});
  return spec;
}

void complete_sweep_spec(SweepSpec& spec) {
  if (spec.policies.empty()) spec.policies.push_back({});
  if (spec.settings.empty()) spec.settings.push_back({});
  for (SweepPolicy& p : spec.policies)
    if (p.label.empty()) p.label = p.specs.empty() ? "dense" : join(p.specs, " + ");
  for (SweepSetting& s : spec.settings)
    if (s.label.empty()) s.label = s.args.empty() ? "default" : join(s.args, " ");
  for (const SweepPolicy& p : spec.policies) {
    if (p.baseline.empty()) continue;
    const auto named =
        std::ranges::count_if(spec.policies, [&](const SweepPolicy& q) { return q.label == p.baseline; });
    TS_CHECK(named == 1 && p.baseline != p.label, "sweep: row '", p.label, "' has baseline '", p.baseline,
             named > 1 ? "', which names several rows" : "', which is not another row's label");
  }
  TS_CHECK(!spec.model.empty(), "sweep: no model (-m or the spec's 'model')");
  TS_CHECK(!spec.tasks.empty(), "sweep: no tasks (--task or the spec's 'tasks')");
}

std::optional<size_t> baseline_row(const SweepSpec& spec, size_t policy) {
  const SweepPolicy& p = spec.policies[policy];
  for (size_t i = 0; i < spec.policies.size(); ++i) {
    const SweepPolicy& q = spec.policies[i];
    if (i != policy && (p.baseline.empty() ? q.specs.empty() && !p.specs.empty() : q.label == p.baseline))
      return i;
  }
  return std::nullopt;
}

std::vector<SweepCell> sweep_cells(const SweepSpec& spec) {
  std::vector<SweepCell> cells;
  for (size_t s = 0; s < spec.settings.size(); ++s)
    for (const std::string& task : spec.tasks)
      for (size_t p = 0; p < spec.policies.size(); ++p) cells.push_back({p, s, task});
  return cells;
}

bool is_perplexity_task(const std::string& task) { return task == "wikitext2" || task == "c4"; }

std::vector<std::string> cell_command(const SweepSpec& spec, const SweepCell& cell) {
  std::vector<std::string> cmd;
  if (is_perplexity_task(cell.task))
    cmd = {"ppl", "--dataset", cell.task};
  else
    cmd = {"eval", "--task", cell.task};
  cmd.insert(cmd.end(), {"-m", spec.model, "--json"});
  if (spec.threads) cmd.insert(cmd.end(), {"-t", std::to_string(spec.threads)});
  if (!spec.data_dir.empty()) cmd.insert(cmd.end(), {"--data-dir", spec.data_dir});
  for (const std::string& p : spec.policies[cell.policy].specs) cmd.insert(cmd.end(), {"--policy", p});
  const std::vector<std::string>& extra = spec.settings[cell.setting].args;
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  return cmd;
}

std::string cell_key(const std::vector<std::string>& command) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const std::string& arg : command) {
    for (const char c : arg + '\0') {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ull;
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

CellMetric cell_metric(const std::string& task, const nlohmann::json& output) {
  try {
    if (is_perplexity_task(task))
      return {"ppl", output.at("ppl").get<double>(), output.at("ppl_stderr").get<double>(),
              output.at("tokens_scored").get<double>()};
    const nlohmann::json& m = output.at(task);
    if (m.contains("score"))
      return {m.at("metric").get<std::string>(), m.at("score").get<double>(), m.at("stderr").get<double>(),
              m.at("n").get<double>()};
    return {"acc", m.at("acc").get<double>(), m.at("acc_stderr").get<double>(), m.at("n").get<double>()};
  } catch (const nlohmann::json::exception& e) {
    fail("sweep: unexpected result for task ", task, ": ", output.dump(), " (", e.what(), ")");
  }
}

std::string sweep_csv(const SweepSpec& spec, const std::vector<SweepRow>& rows) {
  std::map<std::pair<size_t, std::string>, double> dense_seconds;  // (setting, task) -> seconds
  for (const SweepRow& r : rows)
    if (spec.policies[r.cell->policy].specs.empty())
      dense_seconds[{r.cell->setting, r.cell->task}] = r.seconds;
  std::string out =
      "policy,sparsity,setting,task,metric,value,stderr,n,seconds,throughput,speedup,attention_fraction,"
      "ffn_fraction,kv_fraction,baseline,diff,diff_lo,diff_hi,mcnemar_p\n";
  for (const SweepRow& r : rows) {
    const SweepPolicy& p = spec.policies[r.cell->policy];
    const auto dense = dense_seconds.find({r.cell->setting, r.cell->task});
    const auto fraction = [&](const char* key) {
      return r.measured.is_object() && r.measured.contains(key) ? number(r.measured[key].get<double>())
                                                                : std::string();
    };
    std::string sparsity = p.sparsity ? number(*p.sparsity) : p.specs.empty() ? "0" : "";
    if (sparsity.empty() && r.measured.is_object())
      sparsity = number(
          1.0 - std::min(r.measured.value("attention_fraction", 1.0), r.measured.value("ffn_fraction", 1.0)));
    const std::optional<size_t> base = baseline_row(spec, r.cell->policy);
    const auto paired = [&](double v) { return r.paired ? number(v) : std::string(); };
    const std::vector<std::string> fields = {
        p.label,
        sparsity,
        spec.settings[r.cell->setting].label,
        r.cell->task,
        r.metric.name,
        number(r.metric.value),
        number(r.metric.stderr_value),
        number(r.metric.n),
        number(r.seconds),
        r.seconds > 0 ? number(r.metric.n / r.seconds) : "",
        dense != dense_seconds.end() && r.seconds > 0 ? number(dense->second / r.seconds) : "",
        fraction("attention_fraction"),
        fraction("ffn_fraction"),
        fraction("kv_fraction"),
        r.paired && base ? spec.policies[*base].label : "",
        paired(r.paired ? r.paired->c.diff : 0),
        paired(r.paired ? r.paired->c.diff_ci.lo : 0),
        paired(r.paired ? r.paired->c.diff_ci.hi : 0),
        r.paired && r.paired->binary ? number(r.paired->mcnemar.p) : ""};
    for (size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
    out += '\n';
  }
  return out;
}

}  // namespace ts
