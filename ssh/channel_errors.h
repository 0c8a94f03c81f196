// What a libssh channel-open error says, for the executor's unix-socket
// streams and the port forwards alike.
#pragma once

#include <string>

namespace barge::ssh {

// Reads "administratively prohibited" (RFC 4254's reason 1) in a libssh
// channel-open error: the host forbids forwarding, as opposed to a
// connection it tried and could not make.
bool ForwardingProhibited(const std::string& libssh_error);

}  // namespace barge::ssh
