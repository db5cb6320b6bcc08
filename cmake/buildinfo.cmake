# Writes hmb_buildinfo.h with the git revision, compiler and flags; rewrites only on change.
execute_process(COMMAND git -C ${SRC} describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rev)
  set(rev "unknown")
endif()
string(STRIP "${FLAGS}" FLAGS)
set(content "#define HMB_GIT_REVISION \"${rev}\"\n#define HMB_COMPILER \"${COMPILER}\"\n#define HMB_CFLAGS \"${FLAGS}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUT} "${content}")
endif()
