// Loads a DLL the way a Windows program does, LoadLibraryW with the UTF-16 name it is given,
// and unloads it (scripts/windows-e2e.sh runs it under wine). The DLL's constructors register
// its wrappers with the amdhip64.dll beside it: the stand-in HIP runtime
// (crates/kpack-testkit/standin/libamdhip64.c built with KPACK_STANDIN_RUNTIME against
// rocm_kpack.dll), which loads each HIPK wrapper's code objects through kpack_load_code_object.
#include <stdio.h>
#include <windows.h>

int wmain(int argc, wchar_t** argv) {
  if (argc != 2) return 2;
  HMODULE dll = LoadLibraryW(argv[1]);
  if (!dll) {
    fprintf(stderr, "windows_load: LoadLibraryW failed: error %lu\n", GetLastError());
    return 1;
  }
  FreeLibrary(dll);
  return 0;
}
