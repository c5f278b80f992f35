// The test programs' main (Catch2's), and a listener that gives every test case the same global
// random seed, as TF's tf.test.TestCase does in setUp: a case that draws unseeded numbers (a
// Keras initialiser, fit's shuffle) draws the same ones at every run, so a result is
// reproducible and a rare unlucky draw cannot fail one run of CI in a hundred. A case that
// checks the unseeded path itself calls tf::detail::clear_random_seed() first.
//
// TAPEFLOW_TEST_SEED picks the seed: unset, TF's default graph seed (87654321); a number, that
// seed; `random`, a fresh seed per test case, printed so a failure can be replayed with
// TAPEFLOW_TEST_SEED=<it> (for hunting seed-dependent failures); `none`, no global seed (the
// process starts unseeded, as a user's program does).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <string>

#include "core/hash.h"
#include "ops/random.h"

namespace tf = tapeflow;

namespace {

struct SeedMode {
  enum Kind { kFixed, kRandom, kNone } kind = kFixed;
  int64_t seed = tf::detail::kDefaultGraphSeed;
};

SeedMode seed_mode() {
  SeedMode m;
  const char* env = std::getenv("TAPEFLOW_TEST_SEED");
  if (env == nullptr || *env == '\0') return m;
  const std::string v = env;
  if (v == "none") {
    m.kind = SeedMode::kNone;
  } else if (v == "random") {
    m.kind = SeedMode::kRandom;
  } else {
    try {
      size_t used = 0;
      m.seed = std::stoll(v, &used);
      if (used != v.size()) throw std::invalid_argument(v);
    } catch (const std::exception&) {
      std::cerr << "TAPEFLOW_TEST_SEED=" << v
                << " is not a seed: give an integer, `random` or `none`\n";
      std::exit(2);
    }
  }
  return m;
}

uint64_t mix(uint64_t z) {
  return tapeflow::detail::splitmix64_mix(z);
}

// `random`: a fresh seed per test case, the same in every process of one mpirun job (the
// multi-worker cases assume every worker runs the same program with the same seed): the run's
// base comes from the job's PMIx namespace under mpirun, else from std::random_device.
int64_t random_case_seed(const std::string& name) {
  static const uint64_t base = [] {
    if (const char* job = std::getenv("PMIX_NAMESPACE"); job != nullptr && *job != '\0') {
      return mix(std::hash<std::string>{}(job));
    }
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  return static_cast<int64_t>(mix(base ^ std::hash<std::string>{}(name)) >> 1);
}

class GlobalSeedListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    static const SeedMode mode = seed_mode();
    switch (mode.kind) {
      case SeedMode::kNone:
        tf::detail::clear_random_seed();
        break;
      case SeedMode::kFixed:
        tf::random::set_seed(mode.seed);
        break;
      case SeedMode::kRandom: {
        const int64_t seed = random_case_seed(info.name);
        std::cerr << "TAPEFLOW_TEST_SEED=" << seed << " for \"" << info.name << "\"\n";
        tf::random::set_seed(seed);
        break;
      }
    }
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(GlobalSeedListener)
