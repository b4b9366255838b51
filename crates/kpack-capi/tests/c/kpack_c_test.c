// The C API as a C program sees it: every function and every error code, through the
// installed header and library. Run by tests/it/c_program.rs, which builds the archives in
// DATA_DIR (argv[1]) from the repo's fixtures:
//   test_noop.kpack, test_zstd.kpack   the reference vectors
//   real.kpack (none), real_zstd.kpack lib/libreal.so#0 for gfx1030 (gfx1030.co) and
//   real_unified.kpack (format v2)     gfx90a:xnack+ (gfx90a_xnackp.co)
//   other.kpack                        lists gfx1030, holds only lib/libother.so#0
//   .kpack/split_gfx1030.kpack         lib/libreal.so#0 for gfx1030 (zstd)
//   env/prefix_gfx1030.kpack           lib/libreal.so#0 for gfx1030 = gfx90a_xnackp.co bytes
//   bad_magic, bad_version, truncated_toc, unknown_scheme, wrong_type, empty .kpack
//   corrupt_zstd.kpack                 lib/libreal.so#0 gfx1030 with a damaged frame
//   big.kpack                          lib/big.so#0 gfx1030, BIG_SIZE bytes (none)
//   a_directory.kpack/                 a directory
#include <rocm_kpack/kpack.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

// Larger than a glibc thread arena (64 MiB), so no arena already mapped can serve it.
#define BIG_SIZE (80u << 20)

static int passed, failed;
static const char* dir;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (cond) {                                                       \
      passed++;                                                       \
    } else {                                                          \
      failed++;                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                 \
    }                                                                 \
  } while (0)
#define CHECK_EQ(a, b) CHECK((a) == (b))

// A ring of buffers per thread: the concurrency test calls this from eight threads.
static const char* data(const char* name) {
  static _Thread_local char bufs[8][4096];
  static _Thread_local int next;
  char* buf = bufs[next++ % 8];
  snprintf(buf, sizeof bufs[0], "%s/%s", dir, name);
  return buf;
}

static unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* buf = malloc(n > 0 ? (size_t)n : 1);
  *size = fread(buf, 1, (size_t)n, f);
  fclose(f);
  return buf;
}

// msgpack {"kpack_search_paths": [paths...], "kernel_name": name}, as the splitter writes it.
static size_t put_str(unsigned char* out, const char* s) {
  size_t n = strlen(s), h;
  if (n < 32) {
    out[0] = (unsigned char)(0xa0 | n);
    h = 1;
  } else {
    out[0] = 0xd9;
    out[1] = (unsigned char)n;
    h = 2;
  }
  memcpy(out + h, s, n);
  return h + n;
}

static size_t hipk_metadata(unsigned char* out, const char* kernel_name,
                            const char* const* paths, size_t npaths) {
  size_t n = 0;
  out[n++] = 0x82;
  n += put_str(out + n, "kpack_search_paths");
  out[n++] = (unsigned char)(0x90 | npaths);
  for (size_t i = 0; i < npaths; i++) n += put_str(out + n, paths[i]);
  n += put_str(out + n, "kernel_name");
  n += put_str(out + n, kernel_name);
  return n;
}

static kpack_error_t open_error(const char* name) {
  kpack_archive_t a = (kpack_archive_t)1;
  kpack_error_t e = kpack_open(data(name), &a);
  CHECK(a == NULL);
  return e;
}

static void test_open_errors(void) {
  kpack_archive_t a;
  CHECK_EQ(kpack_open(NULL, &a), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_open(data("test_noop.kpack"), NULL), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(open_error("missing.kpack"), KPACK_ERROR_FILE_NOT_FOUND);
  CHECK_EQ(open_error("a_directory.kpack"), KPACK_ERROR_IO_ERROR);
  CHECK_EQ(open_error("bad_magic.kpack"), KPACK_ERROR_INVALID_FORMAT);
  CHECK_EQ(open_error("empty.kpack"), KPACK_ERROR_INVALID_FORMAT);
  CHECK_EQ(open_error("bad_version.kpack"), KPACK_ERROR_UNSUPPORTED_VERSION);
  CHECK_EQ(open_error("truncated_toc.kpack"), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  CHECK_EQ(open_error("unknown_scheme.kpack"), KPACK_ERROR_INVALID_FORMAT);
  CHECK_EQ(open_error("wrong_type.kpack"), KPACK_ERROR_INVALID_FORMAT);
  kpack_close(NULL);
}

static void test_reference_noop_vector(void) {
  kpack_archive_t a = NULL;
  CHECK_EQ(kpack_open(data("test_noop.kpack"), &a), KPACK_SUCCESS);
  size_t n = 0;
  const char* s = NULL;
  CHECK_EQ(kpack_get_architecture_count(a, &n), KPACK_SUCCESS);
  CHECK_EQ(n, 2u);
  CHECK_EQ(kpack_get_architecture(a, 0, &s), KPACK_SUCCESS);
  CHECK(strcmp(s, "gfx900") == 0);
  CHECK_EQ(kpack_get_architecture(a, 1, &s), KPACK_SUCCESS);
  CHECK(strcmp(s, "gfx906") == 0);
  CHECK_EQ(kpack_get_architecture(a, 2, &s), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_binary_count(a, &n), KPACK_SUCCESS);
  CHECK_EQ(n, 2u);
  // Sorted byte-wise, not in file order (lib/ was written first); stable until close.
  const char *b0 = NULL, *b1 = NULL, *again = NULL;
  CHECK_EQ(kpack_get_binary(a, 0, &b0), KPACK_SUCCESS);
  CHECK_EQ(kpack_get_binary(a, 1, &b1), KPACK_SUCCESS);
  CHECK(strcmp(b0, "bin/testapp#0") == 0);
  CHECK(strcmp(b1, "lib/libtest.so#0") == 0);
  CHECK_EQ(kpack_get_binary(a, 2, &s), KPACK_ERROR_INVALID_ARGUMENT);

  // Contents equal the raw blob bytes at the offsets the spec lists for this file.
  size_t file_size;
  unsigned char* file = read_file(data("test_noop.kpack"), &file_size);
  struct { const char *bin, *arch; size_t off, size; } want[] = {
      {"lib/libtest.so#0", "gfx900", 64, 119},
      {"lib/libtest.so#0", "gfx906", 183, 219},
      {"bin/testapp#0", "gfx900", 402, 168},
  };
  for (size_t i = 0; i < 3; i++) {
    void* k = NULL;
    size_t size = 0;
    CHECK_EQ(kpack_get_kernel(a, want[i].bin, want[i].arch, &k, &size), KPACK_SUCCESS);
    CHECK_EQ(size, want[i].size);
    CHECK(k && memcmp(k, file + want[i].off, size) == 0);
    kpack_free_kernel(k);
  }
  free(file);
  void* k = (void*)1;
  size_t size = 7;
  CHECK_EQ(kpack_get_kernel(a, "bin/testapp#0", "gfx906", &k, &size), KPACK_ERROR_KERNEL_NOT_FOUND);
  CHECK(k == NULL && size == 0);
  CHECK_EQ(kpack_get_kernel(a, "bin/testapp", "gfx900", &k, &size), KPACK_ERROR_KERNEL_NOT_FOUND);
  CHECK_EQ(kpack_get_binary(a, 0, &again), KPACK_SUCCESS);
  CHECK(again == b0);

  CHECK_EQ(kpack_get_architecture_count(NULL, &n), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_architecture_count(a, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_architecture(NULL, 0, &s), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_architecture(a, 0, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_binary_count(NULL, &n), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_binary_count(a, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_binary(NULL, 0, &s), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_binary(a, 0, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_kernel(NULL, "x", "y", &k, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_kernel(a, NULL, "y", &k, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_kernel(a, "x", NULL, &k, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_kernel(a, "x", "y", NULL, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_get_kernel(a, "x", "y", &k, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  kpack_free_kernel(NULL);
  kpack_close(a);
}

static void test_reference_zstd_vector(void) {
  kpack_archive_t a = NULL;
  CHECK_EQ(kpack_open(data("test_zstd.kpack"), &a), KPACK_SUCCESS);
  const char* s = NULL;
  CHECK_EQ(kpack_get_architecture(a, 0, &s), KPACK_SUCCESS);
  CHECK(strcmp(s, "gfx1100") == 0);
  CHECK_EQ(kpack_get_architecture(a, 1, &s), KPACK_SUCCESS);
  CHECK(strcmp(s, "gfx1101") == 0);
  CHECK_EQ(kpack_get_binary(a, 0, &s), KPACK_SUCCESS);
  CHECK(strcmp(s, "bin/hiptest#0") == 0);
  struct { const char *bin, *arch; size_t size; } want[] = {
      {"lib/libhip.so#0", "gfx1100", 1019},
      {"lib/libhip.so#0", "gfx1101", 619},
      {"bin/hiptest#0", "gfx1100", 1018},
  };
  for (size_t i = 0; i < 3; i++) {
    void* k = NULL;
    size_t size = 0;
    CHECK_EQ(kpack_get_kernel(a, want[i].bin, want[i].arch, &k, &size), KPACK_SUCCESS);
    CHECK_EQ(size, want[i].size);
    free(k);  // kpack_free_kernel is free()
  }
  kpack_close(a);
}

// A frame damaged in an archive that carries digests is damage, not a decoder's failure.
static void test_damaged_frame(void) {
  kpack_archive_t a = NULL;
  CHECK_EQ(kpack_open(data("corrupt_zstd.kpack"), &a), KPACK_SUCCESS);
  void* k = NULL;
  size_t size = 0;
  CHECK_EQ(kpack_get_kernel(a, "lib/libreal.so#0", "gfx1030", &k, &size), KPACK_ERROR_INTEGRITY_CHECK_FAILED);
  CHECK(k == NULL);
  kpack_close(a);
}

static bool count_arches(const char* arch, void* user) {
  (void)arch;
  return ++*(int*)user < 1;  // stop after the first
}

static bool collect_arches(const char* arch, void* user) {
  strcat((char*)user, arch);
  strcat((char*)user, ";");
  return true;
}

static void test_enumerate_architectures(void) {
  char all[256] = "";
  CHECK_EQ(kpack_enumerate_architectures(data("test_zstd.kpack"), collect_arches, all), KPACK_SUCCESS);
  CHECK(strcmp(all, "gfx1100;gfx1101;") == 0);
  int calls = 0;
  CHECK_EQ(kpack_enumerate_architectures(data("test_noop.kpack"), count_arches, &calls), KPACK_SUCCESS);
  CHECK_EQ(calls, 1);
  CHECK_EQ(kpack_enumerate_architectures(NULL, collect_arches, all), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_enumerate_architectures(data("test_zstd.kpack"), NULL, all), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_enumerate_architectures(data("missing.kpack"), collect_arches, all), KPACK_ERROR_FILE_NOT_FOUND);
  CHECK_EQ(kpack_enumerate_architectures(data("bad_magic.kpack"), collect_arches, all), KPACK_ERROR_INVALID_FORMAT);
}

static int marker_in_this_binary;

static void test_discover_binary_path(void) {
  char path[4096], exe[4096];
  size_t offset = 0;
  CHECK_EQ(kpack_discover_binary_path(&marker_in_this_binary, path, sizeof path, &offset), KPACK_SUCCESS);
  CHECK(realpath("/proc/self/exe", exe) != NULL);
  char resolved[4096];
  CHECK(realpath(path, resolved) != NULL && strcmp(resolved, exe) == 0);
  CHECK(offset > 0);
  CHECK_EQ(kpack_discover_binary_path((const void*)&test_discover_binary_path, path, sizeof path, NULL), KPACK_SUCCESS);
  CHECK_EQ(kpack_discover_binary_path(&marker_in_this_binary, path, 4, &offset), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_discover_binary_path(&marker_in_this_binary, path, 0, &offset), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_discover_binary_path(NULL, path, sizeof path, &offset), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_discover_binary_path(&marker_in_this_binary, NULL, sizeof path, &offset), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_discover_binary_path((const void*)16, path, sizeof path, &offset), KPACK_ERROR_PATH_DISCOVERY_FAILED);
}

// Loads lib/libreal.so#co through `cache` with the given search paths and arch list.
static kpack_error_t load(kpack_cache_t cache, const char* kernel, const char* const* paths,
                          size_t npaths, uint32_t co, const char* const* arches, size_t narch,
                          void** out, size_t* size) {
  unsigned char meta[1024];
  hipk_metadata(meta, kernel, paths, npaths);
  return kpack_load_code_object(cache, meta, data("lib/libreal.so"), co, arches, narch, out, size);
}

static int same_as_file(const void* p, size_t size, const char* name) {
  size_t n = 0;
  unsigned char* want = read_file(data(name), &n);
  int same = want && n == size && memcmp(p, want, n) == 0;
  free(want);
  return same;
}

static void test_load_code_object(void) {
  kpack_cache_t cache = NULL;
  CHECK_EQ(kpack_cache_create(&cache), KPACK_SUCCESS);
  CHECK_EQ(kpack_cache_create(NULL), KPACK_ERROR_INVALID_ARGUMENT);
  void* co = NULL;
  size_t size = 0;
  const char* real[] = {"../real.kpack"};
  const char* real_zstd[] = {"../real_zstd.kpack"};
  const char* isa_1030[] = {"amdgcn-amd-amdhsa--gfx1030"};
  // The HIP runtime's list for a gfx90a xnack+ device: native (any feature order), generic.
  const char* isa_90a[] = {"amdgcn-amd-amdhsa--gfx90a:xnack+:sramecc-", "amdgcn-amd-amdhsa--gfx9-generic"};

  CHECK_EQ(load(cache, "lib/libreal.so", real, 1, 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  CHECK(same_as_file(co, size, "gfx1030.co"));
  kpack_free_code_object(co);
  CHECK_EQ(load(cache, "lib/libreal.so", real_zstd, 1, 0, isa_90a, 2, &co, &size), KPACK_SUCCESS);
  CHECK(same_as_file(co, size, "gfx90a_xnackp.co"));
  kpack_free_code_object(co);
  // Format version 2 (scheme unified), which only this library reads.
  const char* real_unified[] = {"../real_unified.kpack"};
  CHECK_EQ(load(cache, "lib/libreal.so", real_unified, 1, 0, isa_90a, 2, &co, &size), KPACK_SUCCESS);
  CHECK(same_as_file(co, size, "gfx90a_xnackp.co"));
  kpack_free_code_object(co);
  CHECK_EQ(load(cache, "lib/libreal.so", real_unified, 1, 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  CHECK(same_as_file(co, size, "gfx1030.co"));
  kpack_free_code_object(co);
  kpack_free_code_object(NULL);

  // The reference vector through the loader: "lib/libtest.so#0" for gfx906.
  unsigned char meta[1024];
  const char* noop[] = {"test_noop.kpack"};
  const char* isa_906[] = {"gfx906"};
  hipk_metadata(meta, "lib/libtest.so", noop, 1);
  CHECK_EQ(kpack_load_code_object(cache, meta, data("fake_binary.so"), 0, isa_906, 1, &co, &size), KPACK_SUCCESS);
  CHECK_EQ(size, 219u);
  kpack_free_code_object(co);

  // A NULL entry in the list is skipped.
  const char* with_null[] = {NULL, "gfx1030"};
  CHECK_EQ(load(cache, "lib/libreal.so", real, 1, 0, with_null, 2, &co, &size), KPACK_SUCCESS);
  kpack_free_code_object(co);

  // @GFXARCH@ resolved against the binary's directory (lib/ → ../.kpack/).
  const char* split[] = {"../.kpack/split_@GFXARCH@.kpack"};
  CHECK_EQ(load(cache, "lib/libreal.so", split, 1, 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  CHECK(same_as_file(co, size, "gfx1030.co"));
  kpack_free_code_object(co);

  // other.kpack lists gfx1030 without this kernel: the search goes on to real.kpack.
  const char* other_first[] = {"../other.kpack", "../real.kpack"};
  CHECK_EQ(load(cache, "lib/libreal.so", other_first, 2, 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  CHECK(same_as_file(co, size, "gfx1030.co"));
  kpack_free_code_object(co);

  co = (void*)1;
  CHECK_EQ(load(cache, "lib/libreal.so", real, 1, 7, isa_1030, 1, &co, &size), KPACK_ERROR_KERNEL_NOT_FOUND);
  CHECK(co == NULL && size == 0);
  const char* isa_none[] = {"gfx9999"};
  CHECK_EQ(load(cache, "lib/libreal.so", real, 1, 0, isa_none, 1, &co, &size), KPACK_ERROR_ARCH_NOT_FOUND);
  const char* missing[] = {"../nowhere_@GFXARCH@.kpack"};
  CHECK_EQ(load(cache, "lib/libreal.so", missing, 1, 0, isa_1030, 1, &co, &size), KPACK_ERROR_ARCHIVE_NOT_FOUND);
  const char* corrupt[] = {"../corrupt_zstd.kpack"};
  CHECK_EQ(load(cache, "lib/libreal.so", corrupt, 1, 0, isa_1030, 1, &co, &size), KPACK_ERROR_INTEGRITY_CHECK_FAILED);
  const char* bad[] = {"../bad_magic.kpack"};
  CHECK_EQ(load(cache, "lib/libreal.so", bad, 1, 0, isa_1030, 1, &co, &size), KPACK_ERROR_INVALID_FORMAT);

  // Metadata: not a map, wrong types, no search path, garbage.
  const unsigned char not_map[] = {0x91, 0xa1, 'x'};
  const unsigned char wrong_type[] = {0x82, 0xab, 'k', 'e', 'r', 'n', 'e', 'l', '_', 'n', 'a', 'm', 'e', 0x05,
                                      0xb2, 'k', 'p', 'a', 'c', 'k', '_', 's', 'e', 'a', 'r', 'c', 'h', '_',
                                      'p', 'a', 't', 'h', 's', 0x90};
  const unsigned char garbage[] = {0xc1, 0, 0, 0};
  const unsigned char* bad_meta[] = {not_map, wrong_type, garbage};
  for (size_t i = 0; i < 3; i++)
    CHECK_EQ(kpack_load_code_object(cache, bad_meta[i], data("lib/libreal.so"), 0, isa_1030, 1, &co, &size),
             KPACK_ERROR_INVALID_METADATA);
  hipk_metadata(meta, "lib/libreal.so", real, 1);
  CHECK_EQ(kpack_load_code_object(cache, meta, data("lib/libreal.so"), 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  kpack_free_code_object(co);

  // Every pointer checked, and an empty list.
  const char* bin = data("lib/libreal.so");
  CHECK_EQ(kpack_load_code_object(NULL, meta, bin, 0, isa_1030, 1, &co, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_load_code_object(cache, NULL, bin, 0, isa_1030, 1, &co, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_load_code_object(cache, meta, NULL, 0, isa_1030, 1, &co, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_load_code_object(cache, meta, bin, 0, NULL, 1, &co, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_load_code_object(cache, meta, bin, 0, isa_1030, 0, &co, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_load_code_object(cache, meta, bin, 0, isa_1030, 1, NULL, &size), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(kpack_load_code_object(cache, meta, bin, 0, isa_1030, 1, &co, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  kpack_cache_destroy(cache);
  kpack_cache_destroy(NULL);
}

static kpack_cache_t cache_with(const char* name, const char* value) {
  setenv(name, value, 1);
  kpack_cache_t cache = NULL;
  CHECK_EQ(kpack_cache_create(&cache), KPACK_SUCCESS);
  unsetenv(name);
  return cache;
}

static void test_environment(void) {
  void* co = NULL;
  size_t size = 0;
  const char* real[] = {"../real.kpack"};
  const char* isa_1030[] = {"gfx1030"};
  char value[8192];

  kpack_cache_t cache = cache_with("ROCM_KPACK_DISABLE", "1");
  CHECK_EQ(load(cache, "lib/libreal.so", real, 1, 0, isa_1030, 1, &co, &size), KPACK_ERROR_NOT_IMPLEMENTED);
  kpack_cache_destroy(cache);
  cache = cache_with("ROCM_KPACK_DISABLE", "0");
  CHECK_EQ(load(cache, "lib/libreal.so", real, 1, 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  kpack_free_code_object(co);
  kpack_cache_destroy(cache);

  // The override replaces the embedded path; @GFXARCH@ is expanded there too; empty parts
  // are dropped.
  snprintf(value, sizeof value, ":%s::", data(".kpack/split_@GFXARCH@.kpack"));
  cache = cache_with("ROCM_KPACK_PATH", value);
  const char* nowhere[] = {"../nowhere.kpack"};
  CHECK_EQ(load(cache, "lib/libreal.so", nowhere, 1, 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  CHECK(same_as_file(co, size, "gfx1030.co"));
  kpack_free_code_object(co);
  kpack_cache_destroy(cache);

  // The prefix is searched first: its archive holds other bytes for the same key.
  cache = cache_with("ROCM_KPACK_PATH_PREFIX", data("env/prefix_@GFXARCH@.kpack"));
  CHECK_EQ(load(cache, "lib/libreal.so", real, 1, 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  CHECK(same_as_file(co, size, "gfx90a_xnackp.co"));
  kpack_free_code_object(co);
  kpack_cache_destroy(cache);

  // Debug logging goes to stderr and changes no result.
  cache = cache_with("ROCM_KPACK_DEBUG", "1");
  CHECK_EQ(load(cache, "lib/libreal.so", real, 1, 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  kpack_free_code_object(co);
  kpack_cache_destroy(cache);
}

// Eight threads load through one cache and must agree with the single-threaded answers.
#define REQUESTS 6
static kpack_cache_t shared_cache;
static kpack_error_t expected_code[REQUESTS];
static size_t expected_size[REQUESTS];

static kpack_error_t request(int i, size_t* size) {
  const char* paths[] = {"../other.kpack", "../.kpack/split_@GFXARCH@.kpack", "../real_zstd.kpack"};
  const char* isas[][2] = {{"gfx1030", NULL}, {"gfx90a:xnack+", "gfx1030"}, {"gfx1100", NULL}};
  void* co = NULL;
  kpack_error_t e = load(shared_cache, "lib/libreal.so", paths, 3, (uint32_t)(i % 2), isas[i / 2], 2, &co, size);
  kpack_free_code_object(co);
  return e;
}

static void* worker(void* arg) {
  long failures = 0;
  for (int round = 0; round < 200; round++) {
    int i = (int)((round + (long)arg) % REQUESTS);
    size_t size = 0;
    if (request(i, &size) != expected_code[i] || size != expected_size[i]) failures++;
  }
  return (void*)failures;
}

static void test_concurrent_loads(void) {
  kpack_cache_t single = NULL;
  CHECK_EQ(kpack_cache_create(&single), KPACK_SUCCESS);
  shared_cache = single;
  for (int i = 0; i < REQUESTS; i++) expected_code[i] = request(i, &expected_size[i]);
  CHECK_EQ(expected_code[0], KPACK_SUCCESS);
  CHECK_EQ(expected_code[1], KPACK_ERROR_KERNEL_NOT_FOUND);
  CHECK_EQ(expected_code[4], KPACK_ERROR_ARCH_NOT_FOUND);
  kpack_cache_destroy(single);
  CHECK_EQ(kpack_cache_create(&shared_cache), KPACK_SUCCESS);
  pthread_t threads[8];
  for (long t = 0; t < 8; t++) pthread_create(&threads[t], NULL, worker, (void*)t);
  for (int t = 0; t < 8; t++) {
    void* failures = NULL;
    pthread_join(threads[t], &failures);
    CHECK_EQ((long)failures, 0);
  }
  kpack_cache_destroy(shared_cache);
}

// Lowers the address-space limit so the BIG_SIZE copies cannot be allocated. Runs before
// any thread exists, so only the main arena is there to serve them.
static void test_out_of_memory(void) {
  kpack_archive_t a = NULL;
  CHECK_EQ(kpack_open(data("big.kpack"), &a), KPACK_SUCCESS);
  kpack_cache_t cache = NULL;
  CHECK_EQ(kpack_cache_create(&cache), KPACK_SUCCESS);
  void* co = NULL;
  size_t size = 0;
  const char* big[] = {"../big.kpack"};
  const char* isa_1030[] = {"gfx1030"};
  // No successful copy before the limit: glibc would keep the freed block for reuse.

  struct rlimit old;
  getrlimit(RLIMIT_AS, &old);
  unsigned long pages = 0;
  FILE* statm = fopen("/proc/self/statm", "r");
  CHECK(statm && fscanf(statm, "%lu", &pages) == 1);
  fclose(statm);
  struct rlimit low = {(rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (8u << 20), old.rlim_max};
  CHECK_EQ(setrlimit(RLIMIT_AS, &low), 0);
  void* k = NULL;
  CHECK_EQ(kpack_get_kernel(a, "lib/big.so#0", "gfx1030", &k, &size), KPACK_ERROR_OUT_OF_MEMORY);
  CHECK(k == NULL);
  // The cache maps the archive on first use: that fails, as an I/O error, and is retried.
  CHECK_EQ(load(cache, "lib/big.so", big, 1, 0, isa_1030, 1, &co, &size), KPACK_ERROR_IO_ERROR);
  setrlimit(RLIMIT_AS, &old);
  CHECK_EQ(load(cache, "lib/big.so", big, 1, 0, isa_1030, 1, &co, &size), KPACK_SUCCESS);
  CHECK_EQ(size, BIG_SIZE);
  kpack_free_code_object(co);
  // With the archive mapped, the copy alone fails.
  CHECK_EQ(setrlimit(RLIMIT_AS, &low), 0);
  CHECK_EQ(load(cache, "lib/big.so", big, 1, 0, isa_1030, 1, &co, &size), KPACK_ERROR_OUT_OF_MEMORY);
  setrlimit(RLIMIT_AS, &old);
  kpack_cache_destroy(cache);
  kpack_close(a);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  CHECK(strcmp(KPACK_MAGIC, "KPAK") == 0);
  CHECK_EQ(KPACK_MAGIC_SIZE, 4);
  CHECK_EQ(KPACK_CURRENT_VERSION, 1);
  CHECK_EQ((int)KPACK_COMPRESSION_ZSTD_PER_KERNEL, 1);
  CHECK_EQ((int)KPACK_COMPRESSION_UNIFIED, 2);
  CHECK_EQ((int)KPACK_ERROR_ARCH_NOT_FOUND, 14);
  test_open_errors();
  test_reference_noop_vector();
  test_reference_zstd_vector();
  test_damaged_frame();
  test_enumerate_architectures();
  test_discover_binary_path();
  test_load_code_object();
  test_environment();
  test_out_of_memory();
  test_concurrent_loads();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
