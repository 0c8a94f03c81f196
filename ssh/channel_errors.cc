#include "ssh/channel_errors.h"

namespace barge::ssh {

bool ForwardingProhibited(const std::string& libssh_error) {
  // libssh 0.10: "Channel opening failure: channel N error (1) administratively prohibited".
  return libssh_error.find("error (1)") != std::string::npos ||
         libssh_error.find("prohibited") != std::string::npos;
}

}  // namespace barge::ssh
