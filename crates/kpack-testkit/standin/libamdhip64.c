/* A stand-in for the HIP runtime (libamdhip64.so.5), built by the tests (kpack-testkit).
 *
 * It records every __hipRegisterFatBinary call as one line in the file named by
 * $KPACK_STANDIN_LOG: "<magic> <version> <reserved1> <hex bytes at the pointer>".
 * For a HIPK wrapper the bytes are exactly the msgpack object the pointer leads to (its
 * length found by walking the msgpack, as the runtime's parser does); for any other wrapper
 * they are the first 24 bytes (the bundle magic).
 *
 * Built with -DKPACK_STANDIN_RUNTIME against librocm_kpack, it also does for each HIPK
 * wrapper what a kpack-aware CLR does (hip_code_object.cpp): find the binary's path from
 * the wrapper's address, then kpack_load_code_object(cache, wrapper->binary, path,
 * (uint32_t)wrapper->reserved1, arch_list, ...) with one process-wide cache, where
 * arch_list is $KPACK_STANDIN_ARCHES split at ',' (full ISA names, such as
 * amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-, then the generic one). The line then ends
 * with " <kpack_error_t>" (" -1" when the stand-in itself failed), and on success the
 * code object is written to $KPACK_STANDIN_OBJECTS/<n>.co, n counting registrations from
 * 0 (so it is the line's index in a fresh log).
 *
 * For a HIPF wrapper, as a stock HIP runtime reads the bundle its pointer leads to, the
 * stand-in copies that bundle from memory to $KPACK_STANDIN_BUNDLES/<n>.bundle when the
 * variable is set: an uncompressed bundle up to its furthest entry end, a CCOB v2/v3 up to
 * its total size (v1 stores none, so it is not copied).
 *
 * Every other entry point only reports "no device". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef KPACK_STANDIN_RUNTIME
#include <rocm_kpack/kpack.h>
#endif

struct wrapper {
  uint32_t magic;
  uint32_t version;
  const unsigned char *binary;
  uint64_t reserved1;
};

#define HIPK 0x4B504948u
#define HIPF 0x48495046u
#define MAX_MARKER 65536 /* the runtime reads at most 64 KiB past the pointer */

#include "msgpack_len.h"

#ifdef KPACK_STANDIN_RUNTIME
#define MAX_ARCHES 16

/* Loads wrapper w's code object as the CLR would and saves it as object n. */
static int load_code_object(const struct wrapper *w, unsigned n) {
  static kpack_cache_t cache; /* registration runs in constructors, one at a time */
  if (!cache && kpack_cache_create(&cache) != KPACK_SUCCESS) {
    fprintf(stderr, "stand-in: kpack_cache_create failed\n");
    return -1;
  }
  char path[4096];
  kpack_error_t err = kpack_discover_binary_path(w, path, sizeof path, NULL);
  if (err != KPACK_SUCCESS) return err;

  char list[1024] = "";
  const char *arches[MAX_ARCHES];
  size_t count = 0;
  const char *env = getenv("KPACK_STANDIN_ARCHES");
  if (env && strlen(env) < sizeof list) strcpy(list, env);
  for (char *save = NULL, *a = strtok_r(list, ",", &save); a && count < MAX_ARCHES;
       a = strtok_r(NULL, ",", &save))
    arches[count++] = a;

  void *object = NULL;
  size_t size = 0;
  err = kpack_load_code_object(cache, w->binary, path, (uint32_t)w->reserved1, arches, count,
                               &object, &size);
  if (err != KPACK_SUCCESS) return err;
  const char *dir = getenv("KPACK_STANDIN_OBJECTS");
  char file[4096];
  int written = -1;
  if (dir && snprintf(file, sizeof file, "%s/%u.co", dir, n) < (int)sizeof file) {
    FILE *f = fopen(file, "wb");
    if (f) {
      written = fwrite(object, 1, size, f) == size ? 0 : -1;
      if (fclose(f) != 0) written = -1;
    }
  }
  if (written != 0)
    fprintf(stderr, "stand-in: could not write object %u to $KPACK_STANDIN_OBJECTS (%s)\n", n,
            dir ? dir : "unset");
  kpack_free_code_object(object);
  return written;
}
#endif

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Length of the bundle at p, from its header, or 0 if it is not one the stand-in measures. */
static uint64_t bundle_len(const unsigned char *p) {
  if (memcmp(p, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0) {
    uint64_t count = le(p + 24, 8), end = 32, at = 32;
    for (uint64_t i = 0; i < count && i < 4096; i++) {
      uint64_t off = le(p + at, 8), size = le(p + at + 8, 8), tlen = le(p + at + 16, 8);
      if (off + size > end) end = off + size;
      at += 24 + tlen;
    }
    return end;
  }
  if (memcmp(p, "CCOB", 4) == 0) {
    uint64_t version = le(p + 4, 2);
    if (version == 2) return le(p + 8, 4);
    if (version == 3) return le(p + 8, 8);
  }
  return 0;
}

static void save_bundle(const struct wrapper *w, unsigned n) {
  const char *dir = getenv("KPACK_STANDIN_BUNDLES");
  char file[4096];
  if (!dir || snprintf(file, sizeof file, "%s/%u.bundle", dir, n) >= (int)sizeof file) return;
  uint64_t len = bundle_len(w->binary);
  FILE *f = len ? fopen(file, "wb") : NULL;
  if (!f) return;
  fwrite(w->binary, 1, len, f);
  fclose(f);
}

static void record(const struct wrapper *w) {
  static unsigned registrations;
  unsigned n = registrations++;
  const char *path = getenv("KPACK_STANDIN_LOG");
  FILE *f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  const char *magic = w->magic == HIPK ? "HIPK" : w->magic == HIPF ? "HIPF" : "other";
  fprintf(f, "%s %u %llu ", magic, w->version, (unsigned long long)w->reserved1);
  size_t len = 24;
  /* The marker is mapped; its page ends the object, so walk no further than needed. */
  if (w->magic == HIPK) len = msgpack_len(w->binary, MAX_MARKER);
  if (w->magic == HIPF) save_bundle(w, n);
  for (size_t i = 0; i < len; i++) fprintf(f, "%02x", w->binary[i]);
#ifdef KPACK_STANDIN_RUNTIME
  /* The CLR goes on only for version 1 HIPK wrappers. */
  if (w->magic == HIPK && w->version == 1) fprintf(f, " %d", load_code_object(w, n));
#endif
  fprintf(f, "\n");
  fclose(f);
}

static void *handles[4096];

void **__hipRegisterFatBinary(const struct wrapper *w) {
  record(w);
  return handles;
}
void __hipUnregisterFatBinary(void **h) { (void)h; }
void __hipRegisterFunction(void **h, const void *f, char *d, const char *n, int t, void *a,
                           void *b, void *c, void *e, int *s) {
  (void)h; (void)f; (void)d; (void)n; (void)t; (void)a; (void)b; (void)c; (void)e; (void)s;
}
int __hipPushCallConfiguration(void) { return 0; }
int __hipPopCallConfiguration(void) { return 0; }
int hipLaunchKernel(void) { return 100; /* hipErrorNoDevice */ }
int hipGetLastError(void) { return 100; }
int hipMalloc(void **p, size_t n) { (void)n; if (p) *p = NULL; return 100; }
int hipFree(void *p) { (void)p; return 0; }
int hipDeviceSynchronize(void) { return 100; }
