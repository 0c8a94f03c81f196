// `rendezvous:`: the head's port and the variable conventions set in each node.
#include "runner/jobfile/blocks.h"

#include <algorithm>

namespace barge::runner::jobfile {

using cluster::kConventions;

constexpr KeyRule<cluster::RendezvousOptions> kRendezvousRules[] = {
    {"port",
     {.type = KeyType::kInteger, .description = "The head's rendezvous port (MASTER_PORT, ...)", .default_value = "29500"},
     [](const Entry& e, cluster::RendezvousOptions& r) {
       if (auto port = ReadPort(e)) r.port = *port;
     }},
    {"env",
     {.type = KeyType::kEnumList, .description = "Rendezvous variable conventions to set (default: all)", .choices = kConventions},
     [](const Entry& e, cluster::RendezvousOptions& r) {
       if (!ExpectList(e, "conventions (" + JoinWords(kConventions, " or ") + ")")) return;
       std::vector<std::string> conventions;
       for (size_t i = 0; i < e.value.size(); ++i) {
         Entry item = e.Element(e.value[i], i);
         std::optional<std::string> c = ReadEnum(item, kConventions);
         if (!c) continue;
         if (std::find(conventions.begin(), conventions.end(), *c) != conventions.end()) {
           item.Error(QuoteValue(*c) + " is listed twice");
           continue;
         }
         conventions.push_back(*c);
       }
       r.conventions = conventions;
     }},
};
std::vector<KeyInfo> RendezvousKeys() { return Describe(kRendezvousRules); }

SeenKeys ReadRendezvous(const Entry& e, cluster::RendezvousOptions& r) { return ReadMapping(e, kRendezvousRules, r); }

}  // namespace barge::runner::jobfile
