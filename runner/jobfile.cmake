# Job file parsing and validation: YAML text -> JobSpec, or every error with
# file, line and key. Needs only the header-only structs of container/,
# cluster/ and ssh/, so it links none of their libraries.
add_library(barge_jobfile STATIC
  ${CMAKE_CURRENT_LIST_DIR}/job_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_schema.cc
  ${CMAKE_CURRENT_LIST_DIR}/overrides.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_text.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_values.cc
  ${CMAKE_CURRENT_LIST_DIR}/suggest.cc
  ${CMAKE_CURRENT_LIST_DIR}/units.cc
  ${CMAKE_CURRENT_LIST_DIR}/window/forward_spec.cc
  ${CMAKE_CURRENT_LIST_DIR}/fleet/hosts_command.cc
  ${CMAKE_CURRENT_LIST_DIR}/fleet/proxy_jump.cc
)
target_include_directories(barge_jobfile PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(barge_jobfile PUBLIC barge_base yaml-cpp PRIVATE nlohmann_json::nlohmann_json)

barge_unit_tests(runner_jobfile_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/job_file_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/job_file_corpus_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/job_text_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/job_values_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/job_schema_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/overrides_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/suggest_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/units_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/fleet/hosts_command_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/fleet/proxy_jump_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/fleet/host_groups_test.cc
  LIBS barge_jobfile
)
# The corpus test reads tests/bad_jobs/ and names its files relative to the
# source root, as a user standing there would.
if(BUILD_TESTING)
  target_compile_definitions(runner_jobfile_tests PRIVATE BARGE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
