# The CUDA build's contract on a machine without a GPU (ctest label cuda-build, run in
# build-cuda/ by scripts/test): bakeoff-trainer links libtorch_cuda and NCCL, and a trial
# on `device: cuda` ends `unsupported` (exit 4) with a reason that says why.
# Usage: cmake -DTRAINER=<path> -DWORK_DIR=<dir> -P cuda_build_check.cmake
execute_process(COMMAND readelf -d "${TRAINER}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${TRAINER} failed (${rc})")
endif()
foreach(lib libtorch_cuda.so libc10_cuda.so libcudart.so libnccl.so)
  if(NOT dynamic MATCHES "NEEDED[^\n]*\\[${lib}")
    message(FATAL_ERROR "${TRAINER} does not link ${lib}; its dynamic section:\n${dynamic}")
  endif()
endforeach()

# The CUDA graph modes are compiled in, not stubbed: the binary calls LibTorch's capture.
execute_process(COMMAND nm -DC --undefined-only "${TRAINER}" OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
foreach(symbol "at::cuda::CUDAGraph::capture_begin" "at::cuda::CUDAGraph::replay")
  string(FIND "${symbols}" "${symbol}" at)
  if(rc OR at EQUAL -1)
    message(FATAL_ERROR "${TRAINER} does not call ${symbol} (nm exit ${rc}): compile_mode cudagraph is not built in")
  endif()
endforeach()

file(MAKE_DIRECTORY "${WORK_DIR}")
file(WRITE "${WORK_DIR}/cuda.json" "{\"device\": \"cuda\", \"steps\": 1, \"warmup_steps\": 0}")
execute_process(COMMAND "${TRAINER}" --config "${WORK_DIR}/cuda.json"
                WORKING_DIRECTORY "${WORK_DIR}" TIMEOUT 120
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 4)
  message(FATAL_ERROR "device cuda without a GPU: expected exit 4 (unsupported), got ${rc}\n"
                      "stdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT out MATCHES "\"kind\":\"unsupported\"" OR NOT out MATCHES "built with CUDA[^\n]*sees no GPU")
  message(FATAL_ERROR "expected an unsupported event saying the CUDA build sees no GPU; stdout:\n${out}")
endif()
string(REGEX MATCH "\"message\":\"[^\"]*" reason "${out}")
message(STATUS "exit 4, ${reason}")

# compile_mode cudagraph on device cuda: the same GPU check comes first.
file(WRITE "${WORK_DIR}/cudagraph.json"
     "{\"device\": \"cuda\", \"compile_mode\": \"cudagraph\", \"steps\": 1, \"warmup_steps\": 4}")
execute_process(COMMAND "${TRAINER}" --config "${WORK_DIR}/cudagraph.json"
                WORKING_DIRECTORY "${WORK_DIR}" TIMEOUT 120
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 4 OR NOT out MATCHES "sees no GPU")
  message(FATAL_ERROR "cudagraph on device cuda without a GPU: expected exit 4 (unsupported, no GPU), "
                      "got ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()
message(STATUS "compile_mode cudagraph: exit 4 (no GPU)")
