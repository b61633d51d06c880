# House rules checked on the tree itself: every file a README names exists
# (scripts/check-readme-files.sh), and the lines this branch changes keep
# the house style (scripts/check-format.sh).
find_program(BP_GIT git)
if(BP_GIT)
  add_test(NAME readme_files COMMAND ${CMAKE_SOURCE_DIR}/scripts/check-readme-files.sh)
  add_test(NAME format_changed_lines COMMAND ${CMAKE_SOURCE_DIR}/scripts/check-format.sh)
endif()
