// The JSON Schema (draft 2020-12) of a job file, generated from the key
// tables the validator reads with (runner/jobfile/job_keys.h), for `barge schema`
// and editors' YAML language servers.
#pragma once

#include <string>

namespace barge::runner {

// The schema as pretty-printed JSON text, ending with a newline. It is
// never stricter than barge: a number written as a string where barge
// reads a number (`port: "22"`), a number or boolean where it reads text,
// and an empty block (`container:`) all validate. It can be looser: value
// checks (sizes, addresses, images, ...) and checks across keys stay
// barge's own.
std::string JobSchemaJson();

}  // namespace barge::runner
