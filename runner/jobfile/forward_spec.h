// The text of a forward: "[LOCAL:]REMOTE" (job file `forward:` entries and
// `barge forward JOB [LOCAL:]REMOTE`), parsed into ports.
#pragma once

#include <string>

#include "base/status.h"

namespace barge::runner {

struct ForwardPorts {
  int local_port = 0;   // on 127.0.0.1 of barge's machine
  int remote_port = 0;  // the node's port
};

// "6006" → 6006:6006; "16006:6006" → 16006 → 6006. Each port 1..65535; the
// error names the text and what was expected.
[[nodiscard]] Result<ForwardPorts> ParseForwardPorts(const std::string& text);

}  // namespace barge::runner
