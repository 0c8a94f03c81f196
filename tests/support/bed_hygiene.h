// What every test program that runs barge on the bed (tests/e2e/) shares,
// so that no test is put out of its hosts by what another test left:
//  - before the first test, XDG_CONFIG_HOME is set to tests/support/xdg,
//    whose barge/config.yaml is the suite's user defaults (a host's failure
//    record counts only its last second); every barge a test runs
//    inherits it;
//  - before the first test and after each test, the failure record's entries
//    (runner/remote/host_record.h) on every bed host's engine and on this
//    machine's own engine are removed (ClearFaultRecords).
// Registered by bed_hygiene.cc itself (a gtest event listener), in every
// program that is built with it.
#pragma once

#include <string>

namespace barge::testing {

// The suite's XDG_CONFIG_HOME (tests/support/xdg in the source tree).
std::string SuiteConfigHome();

// Removes the failure record's entries (created, never started, named
// barge-fault-*, labelled barge.fault) from this machine's engine and,
// when the bed is up ($BARGE_BED_DIR/bed.env), from every bed host's
// engine. Returns what it could not list or remove ("" when all went).
std::string ClearFaultRecords();

}  // namespace barge::testing
