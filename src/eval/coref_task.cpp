#include "eval/coref_task.h"

#include <algorithm>
#include <random>

#include "eval/example_rng.h"

namespace ts {
namespace {

struct IntroTieback {
  std::string intro, tieback;
};

struct Pools {
  std::vector<std::string> locations, philosophy, food, math;
  std::vector<IntroTieback> intros;
};

// Every combination of the parts of a pool, in order.
template <typename F>
void combine(size_t n_a, size_t n_b, F&& f) {
  for (size_t a = 0; a < n_a; ++a)
    for (size_t b = 0; b < n_b; ++b) f(a, b);
}

Pools build_pools() {
  Pools p;
  const std::vector<std::string> stems = {"wraith", "zira", "mel",  "thorn", "glim", "vael", "quor",
                                          "bryn",   "ost",  "lume", "kael",  "fen",  "mor",  "syl",
                                          "drav",   "ith",  "cal",  "ner",   "vor",  "ash"};
  const std::vector<std::string> ends = {"spire", "grove", "haven", "mere",  "hollow",
                                         "reach", "fell",  "ford",  "crest", "wick"};
  combine(stems.size(), ends.size(), [&](size_t a, size_t b) { p.locations.push_back(stems[a] + ends[b]); });
  // 100 of the 200 names, fixed once for the task (the pool is part of the task, not of a run).
  std::mt19937_64 pool_rng(42);
  for (size_t i = 0; i < 100; ++i)
    std::swap(p.locations[i], p.locations[i + pool_rng() % (p.locations.size() - i)]);
  p.locations.resize(100);

  const std::vector<std::string> weathers = {"luminescent fog", "silver rain", "amber dust", "drifting snow",
                                             "violet haze"};
  const std::vector<std::string> lands = {"a harbor of crooked piers", "a valley of terraced orchards",
                                          "an island of black sand", "a plateau of wind-carved stone",
                                          "a marsh of floating gardens"};
  const std::vector<std::string> sights = {"lanterns that hum at dusk", "bells that ring with the tide",
                                           "statues that face the open sea",
                                           "bridges woven from living reeds"};
  for (const std::string& w : weathers)
    for (const std::string& l : lands)
      for (const std::string& s : sights)
        p.intros.push_back({"Shrouded in " + w + ", " + l + " hides " + s +
                                ", and travelers swear the air itself changes color at night. The place is:",
                            "Which location, shrouded in " + w + ", is " + l + " that hides " + s + "?"});

  const std::vector<std::string> virtues = {"patience",  "doubt", "kindness", "memory",   "solitude",
                                            "curiosity", "grief", "honesty",  "ambition", "wonder"};
  const std::vector<std::string> claims = {"is a seed that only sprouts in the soil of waiting",
                                           "teaches more than any certainty ever could",
                                           "is the quiet architecture beneath every lasting friendship",
                                           "shapes the self the way a river shapes its stone",
                                           "reveals the parts of us that noise keeps hidden",
                                           "is a lantern carried into rooms we have not yet entered",
                                           "asks us to hold what we cannot keep",
                                           "is the debt we owe to those who trust us",
                                           "burns brightest when it serves something larger than itself",
                                           "turns the ordinary world into a question worth asking"};
  combine(virtues.size(), claims.size(), [&](size_t a, size_t b) {
    p.philosophy.push_back("In the spirit of quiet reflection, one might say that " + virtues[a] + " " +
                           claims[b] + ", a wisdom waiting to sprout.");
  });

  const std::vector<std::string> dishes = {
      "saffron risotto",  "charred leek soup",     "honey-glazed carrots", "lemon ricotta tart",
      "smoked trout pie", "cardamom rice pudding", "roasted fig salad",    "black garlic noodles",
      "apple cider stew", "toasted barley bread"};
  const std::vector<std::string> finishes = {
      "whose every bite tastes of slow afternoons and home-cooked love",
      "simmered until the kitchen smells like a festival",
      "finished with a whisper of sea salt and fresh herbs",
      "served warm on a chipped plate that has fed three generations",
      "where sweetness and smoke meet in perfect balance",
      "layered with textures that surprise the tongue",
      "best shared at a long table with friends",
      "brightened by a squeeze of citrus at the very end",
      "that turns a rainy evening into a celebration",
      "crowned with a crisp golden crust"};
  combine(dishes.size(), finishes.size(), [&](size_t a, size_t b) {
    p.food.push_back("Savor the delicate " + dishes[a] + ", " + finishes[b] + ".");
  });

  std::mt19937_64 math_rng(7);
  for (size_t i = 0; i < 100; ++i) {
    const uint64_t a = 10 + math_rng() % 40, b = 2 + math_rng() % 20, c = 1 + math_rng() % 9;
    p.math.push_back("If we compute " + std::to_string(a) + " minus " + std::to_string(b) + " and then add " +
                     std::to_string(c) + ", it gives us " + std::to_string(a - b + c) + ".");
  }
  return p;
}

}  // namespace

std::vector<CorefExample> make_coref_examples(size_t n, uint64_t seed) {
  static const Pools pools = build_pools();
  std::vector<CorefExample> out;
  for (size_t i = 0; i < n; ++i) {
    std::mt19937_64 rng = example_rng(seed, i);
    const IntroTieback& lt = pick(rng, pools.intros);
    const std::string& loc = pick(rng, pools.locations);
    const std::string& ph = pick(rng, pools.philosophy);
    const std::string& fd = pick(rng, pools.food);
    const std::string& mp = pick(rng, pools.math);
    out.push_back({lt.intro + " " + loc + ". " + ph + ". " + fd + ". " + mp + ". " + lt.tieback + ":", loc});
  }
  return out;
}

}  // namespace ts
