# Doxygen reads /** comments; the headers write their contracts as plain
# /* comments above each declaration and after each field. This filter
# (Doxygen's INPUT_FILTER, cmake/Doxyfile.in) reads them as Doxygen would
# read /** and /**< ones, so the headers stay as they are.
s@^\([[:space:]]*\)/\*\([[:space:]]\)@\1/**\2@
s@;\([[:space:]]*\)/\*\([[:space:]]\)@;\1/**<\2@
s@,\([[:space:]]*\)/\*\([[:space:]]\)@,\1/**<\2@
