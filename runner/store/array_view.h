// A job array as the verbs and the dashboard show it: its record brought
// up to date first (an array whose controller is gone is marked lost, and
// its orphaned running members take their job's outcome), and its members
// as they stand (one whose job waits for hosts shows as waiting). For
// `barge ls`, `ls ARRAY`, `show ARRAY`, `down`, `rerun`, `rm` and the
// dashboard's jobs and array pages alike.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runner/store/array_store.h"

namespace barge::runner {

// The array's record, marked lost first when its controller is gone; an
// array that is not running has its members recorded as running settled:
// each member is a barge process of its own and runs on without the array
// controller, so once its job has ended the member takes the job's
// outcome. Writes what it changes.
[[nodiscard]] Result<ArrayRecord> LiveArray(ArrayStore& store, const std::string& state_dir, const std::string& id);

// Members recorded as running whose job waits for hosts other jobs hold
// (its status `waiting`) are shown waiting; nothing is written.
void ShowWaitingMembers(const std::string& state_dir, std::vector<MemberRecord>* members);

struct ArrayView {
  ArrayRecord array;                 // as LiveArray gives it
  std::vector<MemberRecord> members;  // by index, as ShowWaitingMembers leaves them
};

// Every array, newest first, each as LiveArray and ShowWaitingMembers make
// it.
[[nodiscard]] Result<std::vector<ArrayView>> LiveArrays(ArrayStore& store, const std::string& state_dir);

}  // namespace barge::runner
