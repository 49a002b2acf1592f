// Policy specs, options and the registry: parsing and one-line errors.
#include <gtest/gtest.h>

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
                          "orthorank:a=1=2", "orthorank:a=1,,b=2"}) {
    const std::string e = error_of([&] { PolicySpec::parse(bad); });
    EXPECT_FALSE(e.empty()) << bad;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(PolicyOptions, TypedValuesRangesAndUnknownKeys) {
  PolicyOptions o(PolicySpec::parse("p:ratio=0.25,n=7,layers=9,2-4,3,mode=b"));
  EXPECT_EQ(o.take_double("ratio", 0, 1), 0.25);
  EXPECT_EQ(o.take_double("missing", 0, 1), std::nullopt);
  EXPECT_EQ(o.take_uint("n", 1, 10), 7u);
  EXPECT_EQ(o.take_uint_list("layers"), (std::vector<uint32_t>{2, 3, 4, 9}));
  EXPECT_EQ(o.take_choice<int>("mode", {{"a", 1}, {"b", 2}}), 2);
  EXPECT_EQ(o.take_choice<int>("other", {{"a", 1}, {"b", 2}}), 1);
  EXPECT_NO_THROW(o.finish());

  PolicyOptions range(PolicySpec::parse("p:ratio=1.5"));
  EXPECT_NE(error_of([&] { range.take_double("ratio", 0, 1); }).find("ratio=1.5 is not a number in [0, 1]"),
            std::string::npos);
  PolicyOptions list(PolicySpec::parse("p:layers=3,x"));
  EXPECT_THROW(list.take_uint_list("layers"), Error);
  PolicyOptions choice(PolicySpec::parse("p:mode=c"));
  EXPECT_NE(error_of([&] {
              choice.take_choice<int>("mode", {{"a", 1}, {"b", 2}});
            }).find("one of a|b"),
            std::string::npos);

  PolicyOptions unknown(PolicySpec::parse("p:ratio=0.5,typo=1"));
  unknown.take_double("ratio", 0, 1);
  EXPECT_EQ(error_of([&] { unknown.finish(); }), "policy p: unknown option 'typo' (options: ratio)");
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
