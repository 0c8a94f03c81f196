// `teardown:`: the host and local commands run at teardown.
#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

constexpr KeyRule<TeardownDraft> kTeardownRules[] = {
    {"host_command",
     {.type = KeyType::kString, .description = "Shell command run on each host over SSH at teardown"},
     [](const Entry& e, TeardownDraft& t) {
       t.hooks.host_command = ReadNonEmpty(e, "a shell command");
       if (t.hooks.host_command) t.commands.push_back(e);
     }},
    {"local_command",
     {.type = KeyType::kString, .description = "Shell command run here, once per host, at teardown"},
     [](const Entry& e, TeardownDraft& t) {
       t.hooks.local_command = ReadNonEmpty(e, "a shell command");
       if (t.hooks.local_command) t.commands.push_back(e);
     }},
};
std::vector<KeyInfo> TeardownKeys() { return Describe(kTeardownRules); }

SeenKeys ReadTeardown(const Entry& e, TeardownDraft& t) { return ReadMapping(e, kTeardownRules, t); }

}  // namespace barge::runner::jobfile
