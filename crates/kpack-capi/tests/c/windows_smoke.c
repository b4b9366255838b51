// rocm_kpack.dll as a Windows C program sees it, through the header (dllimport) and an import
// library (scripts/windows.sh links it once with librocm_kpack.dll.a, once with the MSVC
// rocm_kpack.lib, and runs both under wine). argv[1]: fixtures/vectors/test_zstd.kpack.
#include <rocm_kpack/kpack.h>

#include <stdio.h>
#include <string.h>

static int failed;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      failed++;                                                                  \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                            \
  } while (0)

static int ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && _stricmp(s + n - m, suffix) == 0;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  kpack_archive_t archive = NULL;
  CHECK(kpack_open(argv[1], &archive) == KPACK_SUCCESS);
  size_t count = 0;
  CHECK(kpack_get_architecture_count(archive, &count) == KPACK_SUCCESS && count == 2);
  void* kernel = NULL;
  size_t size = 0;
  CHECK(kpack_get_kernel(archive, "lib/libhip.so#0", "gfx1100", &kernel, &size) == KPACK_SUCCESS);
  CHECK(size == 1019 && kernel != NULL);
  kpack_free_kernel(kernel);
  kpack_close(archive);

  archive = NULL;
  CHECK(kpack_open("no-such-file.kpack", &archive) == KPACK_ERROR_FILE_NOT_FOUND && archive == NULL);

  // The module holding an address: this EXE for its own code, the DLL for the DLL's.
  char path[1024];
  size_t offset = 0;
  CHECK(kpack_discover_binary_path((const void*)&main, path, sizeof path, &offset) == KPACK_SUCCESS);
  CHECK(ends_with(path, ".exe") && offset > 0);
  CHECK(kpack_discover_binary_path((const void*)&kpack_open, path, sizeof path, NULL) == KPACK_SUCCESS);
  CHECK(ends_with(path, "\\rocm_kpack.dll"));

  kpack_cache_t cache = NULL;
  CHECK(kpack_cache_create(&cache) == KPACK_SUCCESS && cache != NULL);
  kpack_cache_destroy(cache);
  if (failed) return 1;
  printf("windows_smoke: ok\n");
  return 0;
}
