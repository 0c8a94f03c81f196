// The rendezvous conventions: the one list of the variable-name families
// barge can inject (rendezvous.env in the job file; RendezvousEnv).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace barge::cluster {

// In the order RendezvousEnv writes them.
inline constexpr std::string_view kConventions[] = {"barge",    "torch",  "ray",
                                                    "skypilot", "dstack", "sagemaker"};

// All of them, as the job's default.
inline std::vector<std::string> AllConventions() {
  return std::vector<std::string>(std::begin(kConventions), std::end(kConventions));
}

}  // namespace barge::cluster
