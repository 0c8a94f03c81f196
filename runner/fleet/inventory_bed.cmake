# hosts_command and ssh.proxy_jump on the bed (runner/fleet/hosts_command_bed_test.cc).
if(BUILD_TESTING)
barge_bed_tests(runner_fleet_inventory_bed_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/hosts_command_bed_test.cc
  ${PROJECT_SOURCE_DIR}/tests/bed_job.cc LIBS barge_testbed barge_ssh)
target_compile_definitions(runner_fleet_inventory_bed_tests PRIVATE BARGE_BINARY="$<TARGET_FILE:barge>")
add_dependencies(runner_fleet_inventory_bed_tests barge)
endif()
