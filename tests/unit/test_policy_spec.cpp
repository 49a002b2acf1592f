// Policy specs, options and the registry: parsing and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "policies/builtin_policies.h"
#include "runtime/policy_spec.h"

namespace ts {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PolicySpec, ParsesNameOptionsAndContinuedLists) {
  const PolicySpec bare = PolicySpec::parse("sleb");
  EXPECT_EQ(bare.name, "sleb");
  EXPECT_TRUE(bare.options.empty());

  const PolicySpec s = PolicySpec::parse("orthorank:ratio=0.333,layers=3,5,8-10,profile=a.json");
  EXPECT_EQ(s.name, "orthorank");
  ASSERT_EQ(s.options.size(), 3u);
  EXPECT_EQ(s.options[0], (std::pair<std::string, std::string>{"ratio", "0.333"}));
  EXPECT_EQ(s.options[1], (std::pair<std::string, std::string>{"layers", "3,5,8-10"}));
  EXPECT_EQ(s.options[2], (std::pair<std::string, std::string>{"profile", "a.json"}));
  EXPECT_EQ(s.text(), "orthorank:ratio=0.333,layers=3,5,8-10,profile=a.json");
}

TEST(PolicySpec, MalformedSpecsAreOneLineErrors) {
  for (const char* bad : {"", ":ratio=1", "orthorank:", "orthorank:3", "orthorank:=1", "orthorank:a=1,a=2",
                          "orthorank:a=1=2", "orthorank:a=1,,b=2",
                          // found by fuzz/fuzz_policy_spec.cpp: quoted back, a newline broke the line
                          "streaming:window=364,sin\n\x01ks=4"}) {
    const std::string e = error_of([&] { PolicySpec::parse(bad); });
    EXPECT_FALSE(e.empty()) << bad;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

const PolicyOptionList kDeclared = {number_option("ratio", 0, 1, "", "r"),
                                    integer_option("n", 1, 10, "3", "n"),
                                    list_option("layers", "l"),
                                    choice_option("mode", {"a", "b"}, "m"),
                                    choice_option("other", {"a", "b"}, "o"),
                                    number_option("decay", 0, 1, "0.9", "d"),
                                    integer_option("seed", 0, UINT64_MAX, "0", "s")};

TEST(PolicyOptions, TypedValuesRangesFallbacksAndUnknownKeys) {
  PolicyOptions o(PolicySpec::parse("p:ratio=0.25,n=7,layers=9,2-4,3,mode=b,seed=18446744073709551615"),
                  kDeclared);
  EXPECT_EQ(o.number("ratio"), 0.25);
  EXPECT_EQ(o.integer("n"), 7u);
  EXPECT_EQ(o.list("layers"), (std::vector<uint32_t>{2, 3, 4, 9}));
  EXPECT_EQ(o.choice<int>("mode", {1, 2}), 2);
  EXPECT_EQ(o.choice<int>("other", {1, 2}), 1);  // absent: the first declared choice
  EXPECT_EQ(o.number("decay"), 0.9);             // absent: the declared fallback
  EXPECT_EQ(o.integer("seed"), UINT64_MAX);
  EXPECT_NO_THROW(o.finish());
  PolicyOptions absent(PolicySpec::parse("p"), kDeclared);
  EXPECT_EQ(absent.number("ratio"), std::nullopt);  // no fallback: unset
  EXPECT_EQ(absent.integer("n"), 3u);
  EXPECT_THROW(absent.number("missing"), std::logic_error);  // undeclared
  EXPECT_THROW(absent.integer("ratio"), std::logic_error);   // declared as another type
  EXPECT_THROW(absent.choice<int>("mode", {1, 2, 3}), std::logic_error);

  PolicyOptions range(PolicySpec::parse("p:ratio=1.5,n=11"), kDeclared);
  EXPECT_NE(error_of([&] { range.number("ratio"); }).find("ratio=1.5 is not a number in [0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { range.integer("n"); }).find("n=11 is not an integer in [1, 10]"),
            std::string::npos);
  PolicyOptions list(PolicySpec::parse("p:layers=3,x"), kDeclared);
  EXPECT_THROW(list.list("layers"), Error);
  PolicyOptions choice(PolicySpec::parse("p:mode=c"), kDeclared);
  EXPECT_NE(error_of([&] { choice.choice<int>("mode", {1, 2}); }).find("one of a|b"), std::string::npos);

  PolicyOptions unknown(PolicySpec::parse("p:ratio=0.5,typo=1"), kDeclared);
  unknown.number("ratio");
  EXPECT_EQ(error_of([&] { unknown.finish(); }),
            "policy p: unknown option 'typo' (options: ratio, n, layers, mode, other, decay, seed)");
  PolicyOptions unread(PolicySpec::parse("p:ratio=0.5,decay=0.5"), kDeclared);
  unread.number("ratio");
  EXPECT_NE(error_of([&] { unread.finish(); }).find("decay= has no effect"), std::string::npos);
}

TEST(PolicyRegistry, HelpAndDescriptionComeFromTheDeclarations) {
  for (const PolicyEntry& e : builtin_policies().entries()) {
    EXPECT_FALSE(e.summary.empty()) << e.name;
    EXPECT_FALSE(e.class_name.empty()) << e.name;
    EXPECT_EQ(e.help().find('\n'), std::string::npos) << e.name;
    for (const PolicyOption& o : e.options) {
      EXPECT_NE(e.usage().find(o.usage()), std::string::npos) << e.name << " " << o.key;
      EXPECT_FALSE(o.help.empty()) << e.name << " " << o.key;
    }
  }
  const PolicyEntry& quest =
      *std::find_if(builtin_policies().entries().begin(), builtin_policies().entries().end(),
                    [](const PolicyEntry& e) { return e.name == "quest"; });
  EXPECT_EQ(quest.help(),
            "quest:[keep=F][,sinks=4][,first_layer=1][,page=16][,shared=0][,bounds=f32|i8]: key-selecting "
            "baseline Quest: "
            "query-aware selection of pages by min/max key bounds (shared=1: one choice per KV group, the "
            "fast one)");
  const nlohmann::ordered_json d = describe_policies(builtin_policies());
  ASSERT_EQ(d.size(), builtin_policies().entries().size());
  const auto& kvquant =
      *std::find_if(d.begin(), d.end(), [](const auto& e) { return e["name"] == "kvquant"; });
  EXPECT_EQ(kvquant["class"], "KVQuant");
  EXPECT_EQ(kvquant["options"][0]["key"], "bits");
  EXPECT_TRUE(kvquant["options"][0]["default"].is_null());
  EXPECT_EQ(kvquant["options"][2]["choices"], (nlohmann::ordered_json{"token", "kivi"}));
  EXPECT_NE(error_of([&] { builtin_policies().create("zipvl:high=8"); }).find("has no effect"),
            std::string::npos);
}

TEST(PolicyRegistry, BuildsKnownPoliciesAndRejectsTheRest) {
  const PolicyRegistry& r = builtin_policies();
  EXPECT_EQ(r.create("orthorank:layers=1,2,ratio=0.5")->name(), "orthorank");
  EXPECT_EQ(r.create("sleb:layers=3")->describe(), "sleb:layers=3");
  EXPECT_EQ(r.create("shortened:layers=3")->name(), "shortened");
  // The known names follow the registry (each method adds its own).
  const std::string unknown = error_of([&] { r.create("nosuch:keep=0.5"); });
  EXPECT_EQ(unknown.rfind("unknown policy 'nosuch' (known: orthorank, sleb, shortened", 0), 0u) << unknown;
  for (const PolicyEntry& e : r.entries()) EXPECT_NE(unknown.find(e.name), std::string::npos) << e.name;
  EXPECT_NE(error_of([&] { r.create("orthorank:ratio=0.5"); }).find("either layers=LIST or profile=FILE"),
            std::string::npos);
  EXPECT_NE(error_of([&] { r.create("sleb:layers=1,profile=x.json"); }).find("either"), std::string::npos);
  EXPECT_NE(error_of([&] { r.create("sleb:layers=1,ratio=0.5"); }).find("unknown option 'ratio'"),
            std::string::npos);
  EXPECT_THROW(r.create("orthorank:layers=1,select=sideways"), Error);
}

}  // namespace
}  // namespace ts
