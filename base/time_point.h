// TimePoint: a wall-clock instant, to the millisecond, as the job store
// records it and barge prints it.
#pragma once

#include <chrono>

namespace barge {

using TimePoint = std::chrono::sys_time<std::chrono::milliseconds>;

}  // namespace barge
