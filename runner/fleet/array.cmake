# Job arrays (runner/fleet/): one member job per row, each on its own hosts
# from the job's inventory. barge_fleet_array is linked into barge here.
add_library(barge_fleet_array STATIC
  ${CMAKE_CURRENT_LIST_DIR}/array_cli.cc
  ${CMAKE_CURRENT_LIST_DIR}/array_events.cc
  ${CMAKE_CURRENT_LIST_DIR}/array_member.cc
  ${CMAKE_CURRENT_LIST_DIR}/array_params.cc
  ${CMAKE_CURRENT_LIST_DIR}/array_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/array_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/array_summary.cc
  ${CMAKE_CURRENT_LIST_DIR}/host_pool.cc
  ${CMAKE_CURRENT_LIST_DIR}/member_output.cc
)
target_include_directories(barge_fleet_array PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(barge_fleet_array
  PUBLIC barge_runner barge_store
  PRIVATE SQLite::SQLite3 nlohmann_json::nlohmann_json)
target_link_libraries(barge PRIVATE barge_fleet_array)

barge_unit_tests(runner_fleet_array_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/array_params_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/array_member_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/host_pool_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/array_summary_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/array_store_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/member_output_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/array_events_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/array_cli_test.cc
  LIBS barge_fleet_array
)

if(BUILD_TESTING)
barge_bed_tests(runner_fleet_array_bed_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/array_bed_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/host_groups_bed_test.cc
  ${PROJECT_SOURCE_DIR}/tests/bed_job.cc LIBS barge_testbed barge_ssh)
target_compile_definitions(runner_fleet_array_bed_tests PRIVATE BARGE_BINARY="$<TARGET_FILE:barge>")
add_dependencies(runner_fleet_array_bed_tests barge)
endif()
