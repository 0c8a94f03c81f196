# `barge logs`: a job's kept per-node log files, merged, or followed live:
# barge_logs. Reads the store and the files; knows no SSH.
add_library(barge_logs STATIC ${CMAKE_CURRENT_LIST_DIR}/log_files.cc ${CMAKE_CURRENT_LIST_DIR}/logs_cli.cc)
target_include_directories(barge_logs PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(barge_logs PUBLIC barge_store barge_container barge_jobfile barge_base)

barge_unit_tests(runner_logs_tests
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/logs_cli_test.cc
  LIBS barge_logs
)
