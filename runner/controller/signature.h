// The signature of a webhook's body: HMAC-SHA256 keyed by the receiver's
// secret (OpenSSL), in lowercase hex, as GitHub's and Slack's signing
// headers carry it.
#pragma once

#include <string>
#include <string_view>

namespace barge::runner::internal {

std::string HmacSha256Hex(std::string_view key, std::string_view message);

}  // namespace barge::runner::internal
