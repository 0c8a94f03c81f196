# The job store (SQLite, STATE/barge.db) and the job-history verbs built on
# it (ls, show, rm, prune): barge_store. Depends on nothing else in barge but
# base/, so main.cc and the controller can both link it.
add_library(barge_store STATIC
  ${CMAKE_CURRENT_LIST_DIR}/job_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/jobs_cli.cc
  ${CMAKE_CURRENT_LIST_DIR}/state_dir.cc
)
target_include_directories(barge_store PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(barge_store
  PUBLIC barge_base
  PRIVATE SQLite::SQLite3 nlohmann_json::nlohmann_json)

barge_unit_tests(runner_store_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/job_store_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/jobs_cli_test.cc
  LIBS barge_store SQLite::SQLite3 nlohmann_json::nlohmann_json
)
