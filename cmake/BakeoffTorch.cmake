# The LibTorch that experiments/trainer (and only it) links: the one inside a PyTorch 2.x
# install, by default the project's venv (`scripts/python`, made by scripts/setup).
#
# Defines the INTERFACE target bakeoff_torch and these variables:
#   BAKEOFF_TORCH_PREFIX   the install prefix (holds include/ and lib/)
#   BAKEOFF_TORCH_VERSION  "2.7.1"
#   BAKEOFF_CUDA           ON: link libtorch_cuda, libc10_cuda, the CUDA runtime and NCCL
#                          (defines BAKEOFF_WITH_CUDA, BAKEOFF_WITH_NCCL); OFF: libtorch_cpu
#                          and libc10 only, even from a CUDA wheel.
#   BAKEOFF_GLOO           ON: c10d's Gloo backend (CPU collectives) with the vendored Gloo
#                          headers (experiments/trainer/third_party/gloo/README.md).
#
# Where it looks, first match wins: -DBAKEOFF_TORCH_PREFIX=..., Torch_DIR or a
# CMAKE_PREFIX_PATH entry holding TorchConfig.cmake (torch.utils.cmake_prefix_path), then
# `BAKEOFF_PYTHON -c "import torch.utils; print(torch.utils.cmake_prefix_path)"`.
#
# Why not find_package(Torch): the PyPI wheels are CUDA builds, and TorchConfig.cmake then
# demands a CUDA toolkit that matches, and links libtorch_cuda (which loads cuDNN, cuBLAS
# and the rest, about a second per process start) into every test. The CPU build needs
# neither; the CUDA build takes the wheel's own CUDA headers and libraries
# (site-packages/nvidia/*), which match it exactly, and the machine's toolkit only for
# what the wheel does not bring.

option(BAKEOFF_CUDA "Link the trainer against LibTorch's CUDA libraries and NCCL" OFF)
option(BAKEOFF_GLOO "c10d Gloo collectives for CPU ranks (vendored Gloo headers)" ON)
set(BAKEOFF_PYTHON "${PROJECT_SOURCE_DIR}/scripts/python" CACHE FILEPATH
    "Python whose torch provides LibTorch when neither BAKEOFF_TORCH_PREFIX nor Torch_DIR is set")

# --- Locate the install prefix -------------------------------------------------------
function(_bakeoff_torch_prefix_from_config_dir dir out)
  # <prefix>/share/cmake/Torch/TorchConfig.cmake, as TorchConfig.cmake itself assumes.
  get_filename_component(prefix "${dir}/../../.." ABSOLUTE)
  set(${out} "${prefix}" PARENT_SCOPE)
endfunction()

if(NOT BAKEOFF_TORCH_PREFIX)
  set(config_dir "")
  if(Torch_DIR AND EXISTS "${Torch_DIR}/TorchConfig.cmake")
    set(config_dir "${Torch_DIR}")
  else()
    foreach(p ${CMAKE_PREFIX_PATH})
      foreach(suffix Torch share/cmake/Torch)
        if(NOT config_dir AND EXISTS "${p}/${suffix}/TorchConfig.cmake")
          set(config_dir "${p}/${suffix}")
        endif()
      endforeach()
    endforeach()
  endif()
  if(NOT config_dir AND EXISTS "${BAKEOFF_PYTHON}")
    execute_process(
      COMMAND "${BAKEOFF_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE cmake_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0 AND EXISTS "${cmake_prefix}/Torch/TorchConfig.cmake")
      set(config_dir "${cmake_prefix}/Torch")
    endif()
  endif()
  if(NOT config_dir)
    message(FATAL_ERROR
      "LibTorch not found: run scripts/setup (it makes the venv that ${BAKEOFF_PYTHON} runs), "
      "or pass -DCMAKE_PREFIX_PATH=$(python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') "
      "or -DBAKEOFF_TORCH_PREFIX=<dir holding include/torch and lib/libtorch_cpu.so>")
  endif()
  _bakeoff_torch_prefix_from_config_dir("${config_dir}" prefix)
  set(BAKEOFF_TORCH_PREFIX "${prefix}" CACHE PATH "LibTorch install prefix (include/, lib/)" FORCE)
endif()
set(torch_prefix "${BAKEOFF_TORCH_PREFIX}")

# --- Version and C++ ABI -------------------------------------------------------------
# The macros live in torch/csrc/api/include/torch/version.h up to 2.8 and in
# torch/headeronly/version.h (which the former includes) from 2.9 on.
set(version_header "${torch_prefix}/include/torch/headeronly/version.h")
if(NOT EXISTS "${version_header}")
  set(version_header "${torch_prefix}/include/torch/csrc/api/include/torch/version.h")
endif()
set(BAKEOFF_TORCH_VERSION "")
foreach(part MAJOR MINOR PATCH)
  file(STRINGS "${version_header}" line REGEX "#define TORCH_VERSION_${part} [0-9]+")
  string(REGEX MATCH "[0-9]+$" number "${line}")
  string(APPEND BAKEOFF_TORCH_VERSION "${number}.")
endforeach()
string(REGEX REPLACE "\\.$" "" BAKEOFF_TORCH_VERSION "${BAKEOFF_TORCH_VERSION}")
if(NOT BAKEOFF_TORCH_VERSION MATCHES "^2\\.")
  message(FATAL_ERROR "LibTorch at ${torch_prefix} is version '${BAKEOFF_TORCH_VERSION}'; "
                      "the trainer needs PyTorch 2.x (torch_compat.h)")
endif()
# The full version of a PyTorch install (torch/version.py: "2.7.1+cu126"), so the
# trainer's environment matches what torch.__version__ says in a Python workload of the
# same install; a bare LibTorch has no version.py and keeps TORCH_VERSION.
set(BAKEOFF_TORCH_BUILD_VERSION "${BAKEOFF_TORCH_VERSION}")
if(EXISTS "${torch_prefix}/version.py")
  file(STRINGS "${torch_prefix}/version.py" version_line REGEX "^__version__ = ")
  string(REGEX MATCH "'([^']+)'" _ "${version_line}")
  if(CMAKE_MATCH_1)
    set(BAKEOFF_TORCH_BUILD_VERSION "${CMAKE_MATCH_1}")
  endif()
endif()
file(CONFIGURE OUTPUT "${CMAKE_BINARY_DIR}/generated/bakeoff_torch_build_version.h"
     CONTENT "#pragma once\n#define BAKEOFF_TORCH_BUILD_VERSION \"${BAKEOFF_TORCH_BUILD_VERSION}\"\n")

# The wheels of 2.7 use the C++11 std::string ABI, older ones (<= 2.5 on PyPI) the old
# one; TorchConfig.cmake records which, and the trainer must compile the same way.
set(abi 1)
if(EXISTS "${torch_prefix}/share/cmake/Torch/TorchConfig.cmake")
  file(STRINGS "${torch_prefix}/share/cmake/Torch/TorchConfig.cmake" abi_line
       REGEX "_GLIBCXX_USE_CXX11_ABI=[01]")
  string(REGEX MATCH "_GLIBCXX_USE_CXX11_ABI=([01])" _ "${abi_line}")
  if(CMAKE_MATCH_1 STREQUAL "0")
    set(abi 0)
  endif()
endif()

if(abi EQUAL 0)
  if(NOT BAKEOFF_TRAINER_ONLY)
    message(FATAL_ERROR
      "LibTorch ${BAKEOFF_TORCH_VERSION} at ${torch_prefix} uses the pre-C++11 std::string ABI "
      "(the PyPI wheels up to 2.5); the rest of Bakeoff links Debian's libraries, built with the "
      "C++11 ABI. Build the trainer alone against it: -DBAKEOFF_TRAINER_ONLY=ON "
      "(scripts/build-cuda and bench/gpu/run.sh do)")
  endif()
  # Everything linked into the trainer (its torch-free configuration library too) must
  # agree with LibTorch on std::string's layout.
  add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=0)
endif()

# --- The target ----------------------------------------------------------------------
add_library(bakeoff_torch INTERFACE)
target_include_directories(bakeoff_torch SYSTEM INTERFACE
  "${torch_prefix}/include" "${torch_prefix}/include/torch/csrc/api/include")
target_compile_definitions(bakeoff_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${abi})
# The definitions LibTorch's own targets carry (Caffe2Targets.cmake: USE_DISTRIBUTED,
# USE_C10D_GLOO, USE_RPC, USE_TENSORPIPE for torch_cpu; USE_C10D_NCCL for torch_cuda).
# They change class layouts (torch/csrc/jit/runtime/interpreter.h has a member only with
# USE_DISTRIBUTED; c10d declares the Gloo backend only with USE_C10D_GLOO), so the
# trainer compiles with exactly the library's.
function(_bakeoff_torch_definitions library fallback out)
  set(defs ${fallback})
  set(targets "${torch_prefix}/share/cmake/Caffe2/Caffe2Targets.cmake")
  if(EXISTS "${targets}")
    file(READ "${targets}" text)
    if(text MATCHES "set_target_properties\\(${library} PROPERTIES[^)]*INTERFACE_COMPILE_DEFINITIONS \"([^\"]*)\"")
      set(defs ${CMAKE_MATCH_1})
    endif()
  endif()
  set(${out} ${defs} PARENT_SCOPE)
endfunction()
_bakeoff_torch_definitions(torch_cpu "USE_DISTRIBUTED;USE_C10D_GLOO" torch_cpu_definitions)
target_compile_definitions(bakeoff_torch INTERFACE ${torch_cpu_definitions})
# torch_cpu: ATen, autograd, TorchScript and c10d (TCPStore, Gloo) live there.
find_library(BAKEOFF_TORCH_CPU_LIBRARY torch_cpu PATHS "${torch_prefix}/lib" NO_DEFAULT_PATH REQUIRED)
find_library(BAKEOFF_C10_LIBRARY c10 PATHS "${torch_prefix}/lib" NO_DEFAULT_PATH REQUIRED)
target_link_libraries(bakeoff_torch INTERFACE ${BAKEOFF_TORCH_CPU_LIBRARY} ${BAKEOFF_C10_LIBRARY})

if(BAKEOFF_GLOO)
  target_include_directories(bakeoff_torch SYSTEM INTERFACE
    "${PROJECT_SOURCE_DIR}/experiments/trainer/third_party/gloo")
  target_compile_definitions(bakeoff_torch INTERFACE BAKEOFF_WITH_GLOO)
endif()

if(BAKEOFF_CUDA)
  find_library(BAKEOFF_TORCH_CUDA_LIBRARY torch_cuda PATHS "${torch_prefix}/lib" NO_DEFAULT_PATH)
  find_library(BAKEOFF_C10_CUDA_LIBRARY c10_cuda PATHS "${torch_prefix}/lib" NO_DEFAULT_PATH)
  if(NOT BAKEOFF_TORCH_CUDA_LIBRARY OR NOT BAKEOFF_C10_CUDA_LIBRARY)
    message(FATAL_ERROR "BAKEOFF_CUDA=ON, but LibTorch at ${torch_prefix} has no libtorch_cuda.so / "
                        "libc10_cuda.so: it is a CPU-only build")
  endif()
  # The wheel's CUDA packages (nvidia-cuda-runtime-cu12, nvidia-nccl-cu12, ...) sit next to
  # torch in site-packages and are the exact versions it was built against; a libtorch
  # zip or conda install has none, and then the machine's toolkit provides them.
  get_filename_component(site_packages "${torch_prefix}/.." ABSOLUTE)
  set(nvidia "${site_packages}/nvidia")
  if(EXISTS "${nvidia}/cuda_runtime/include/cuda_runtime_api.h")
    # Only the wheel's headers: mixing in another toolkit's (this machine has CUDA 13
    # for a cu126 wheel) changes struct layouts such as cudaDeviceProp.
    file(GLOB cuda_includes LIST_DIRECTORIES true "${nvidia}/*/include")
    set(cuda_lib_hints "${nvidia}/cuda_runtime/lib")
    set(nccl_hints "${nvidia}/nccl")
  elseif(EXISTS "${nvidia}/cu13/include/cuda_runtime_api.h")
    # The CUDA 13 wheels (torch 2.9+ +cu130) put every CUDA package into one folder,
    # nvidia/cu13/{include,lib}; NCCL stays in nvidia/nccl.
    set(cuda_includes "${nvidia}/cu13/include")
    set(cuda_lib_hints "${nvidia}/cu13/lib")
    set(nccl_hints "${nvidia}/nccl")
    if(NOT EXISTS "${nvidia}/cu13/include/cublas_v2.h" OR NOT EXISTS "${nvidia}/cu13/include/crt/host_config.h")
      # cuda_runtime.h includes crt/host_config.h, which only the nvcc wheel brings (torch
      # does not depend on it), and a partial environment may lack cuBLAS's headers: the
      # toolkit's headers of the same major version supply them, after the wheel's own.
      find_package(CUDAToolkit QUIET)
      if(CUDAToolkit_FOUND AND CUDAToolkit_VERSION_MAJOR EQUAL 13)
        list(APPEND cuda_includes ${CUDAToolkit_INCLUDE_DIRS})
      endif()
    endif()
  else()
    find_package(CUDAToolkit REQUIRED)
    set(cuda_includes ${CUDAToolkit_INCLUDE_DIRS})
    set(cuda_lib_hints ${CUDAToolkit_LIBRARY_DIR})
    set(nccl_hints "$ENV{NCCL_HOME}" "${CUDAToolkit_LIBRARY_ROOT}")
  endif()
  find_path(BAKEOFF_CUDART_INCLUDE cuda_runtime_api.h HINTS ${cuda_includes} NO_DEFAULT_PATH)
  find_library(BAKEOFF_CUDART_LIBRARY NAMES cudart libcudart.so.12 libcudart.so.13 libcudart.so.11.0
    HINTS ${cuda_lib_hints} NO_DEFAULT_PATH)
  if(EXISTS "${nvidia}/nccl/lib/libnccl.so.2")
    # The wheel's NCCL only: another on the default paths (this machine has one for CUDA
    # 13 in /usr/local/lib64) would be found first by its plain name.
    set(BAKEOFF_NCCL_INCLUDE "${nvidia}/nccl/include" CACHE PATH "" FORCE)
    set(BAKEOFF_NCCL_LIBRARY "${nvidia}/nccl/lib/libnccl.so.2" CACHE FILEPATH "" FORCE)
  else()
    find_path(BAKEOFF_NCCL_INCLUDE nccl.h HINTS ${cuda_includes} ${nccl_hints} PATH_SUFFIXES include)
    find_library(BAKEOFF_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${cuda_lib_hints} ${nccl_hints}
      PATH_SUFFIXES lib lib64)
  endif()
  foreach(v BAKEOFF_CUDART_INCLUDE BAKEOFF_CUDART_LIBRARY BAKEOFF_NCCL_INCLUDE BAKEOFF_NCCL_LIBRARY)
    if(NOT ${v})
      message(FATAL_ERROR "BAKEOFF_CUDA=ON: ${v} not found (looked in ${nvidia}/*/ and the CUDA "
                          "toolkit's include/ and lib64/; set CUDAToolkit_ROOT or NCCL_HOME)")
    endif()
  endforeach()
  # ATen/cuda/CUDAContext.h pulls in cuBLAS, cuSPARSE and cuSOLVER headers too.
  target_include_directories(bakeoff_torch SYSTEM INTERFACE ${cuda_includes} ${BAKEOFF_NCCL_INCLUDE})
  # --no-as-needed: torch_cuda registers the CUDA hooks at load time; a linker that drops
  # unreferenced libraries would leave torch::cuda::is_available() false.
  target_link_libraries(bakeoff_torch INTERFACE
    -Wl,--push-state,--no-as-needed ${BAKEOFF_TORCH_CUDA_LIBRARY} -Wl,--pop-state
    ${BAKEOFF_C10_CUDA_LIBRARY} ${BAKEOFF_CUDART_LIBRARY} ${BAKEOFF_NCCL_LIBRARY})
  # libtorch_cuda's own needs (cuDNN, cuSPARSELt, NVSHMEM, ...) sit in the wheel's nvidia/
  # folders; the linker finds them through libtorch_cuda's RUNPATH, and these make it sure.
  file(GLOB wheel_lib_dirs LIST_DIRECTORIES true "${site_packages}/nvidia/*/lib")
  foreach(dir ${wheel_lib_dirs})
    target_link_options(bakeoff_torch INTERFACE "-Wl,-rpath-link,${dir}")
  endforeach()
  _bakeoff_torch_definitions(torch_cuda "" torch_cuda_definitions)
  target_compile_definitions(bakeoff_torch INTERFACE ${torch_cuda_definitions} BAKEOFF_WITH_CUDA BAKEOFF_WITH_NCCL)
endif()

message(STATUS "LibTorch ${BAKEOFF_TORCH_VERSION} at ${torch_prefix} "
               "(CXX11 ABI ${abi}, CUDA ${BAKEOFF_CUDA}, Gloo ${BAKEOFF_GLOO}; ${torch_cpu_definitions})")
