# compile_spirv.cmake — glslc on one shader (cmake -P, from CMakeLists.txt):
#   -DGLSLC=<glslc> -DSRC=<x.comp> -DOUT=<x.spv> -DINC=<shader dir>
#   -DDEFS=<-DA=1,-DB=1> [-DCACHE=<dir>]
# With CACHE, the SPIR-V is kept there under a hash of everything that
# determines it (the source, every header of the shader directory, the
# defines and glslc's version) and copied from there when it is present:
# scripts/test-all.sh builds several trees of one checkout, and every tree
# would otherwise compile the same shaders again.
string(REPLACE "," ";" DEFS "${DEFS}")
set(args --target-env=vulkan1.1 -O -fshader-stage=compute ${DEFS} -I ${INC} -o ${OUT} ${SRC})
if(CACHE)
  file(GLOB headers ${INC}/*.glsl ${INC}/*.h)
  list(SORT headers)
  execute_process(COMMAND ${GLSLC} --version OUTPUT_VARIABLE key ERROR_QUIET)
  string(APPEND key "${DEFS}")
  foreach(f ${SRC} ${headers})
    file(SHA256 ${f} h)
    string(APPEND key ";${f}=${h}")
  endforeach()
  string(SHA256 key "${key}")
  if(EXISTS ${CACHE}/${key}.spv)
    file(COPY_FILE ${CACHE}/${key}.spv ${OUT})
    return()
  endif()
endif()
execute_process(COMMAND ${GLSLC} ${args} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "glslc could not compile ${SRC} (${DEFS}); see its message above.")
endif()
if(CACHE)
  # A whole file or none: copy under a name of this process, then rename.
  string(RANDOM LENGTH 12 tag)
  file(MAKE_DIRECTORY ${CACHE})
  file(COPY_FILE ${OUT} ${CACHE}/${key}.${tag}.tmp)
  file(RENAME ${CACHE}/${key}.${tag}.tmp ${CACHE}/${key}.spv)
endif()
