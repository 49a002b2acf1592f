#pragma once
// The synthetic co-referential retrieval task of TokenButler (paper 001, section 4 / Table 2),
// regenerated from its description: a location is named once after an introduction, three
// unrelated statements follow, then a question that refers back to the introduction must be
// answered with the location. Scored teacher-forced: the model's argmax at each token of the final
// location name (accuracy: all tokens right; coverage: fraction right).
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

struct CorefExample {
  std::string context;   // everything up to and including the question's "?:"
  std::string location;  // the answer; the text continues with " " + location
};

// The paper's template "{intro} {location}. {philosophy}. {food}. {math}. {tieback}: {location}"
// (the statements end in '.', so '..' appears as in the paper's samples) over five pools of 100
// entries each, built by fixed rules in place of the paper's GPT-4o-mini pools. Sample i draws an
// intro with its tieback, a location, a philosophy, a food and a math statement in that order
// from a stream seeded by (seed, i).
std::vector<CorefExample> make_coref_examples(size_t n, uint64_t seed);

}  // namespace ts
