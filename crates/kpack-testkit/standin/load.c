/* Loads a shared library the way a program would: the HIP runtime first (as a NEEDED entry
 * or a prior dlopen would), then the library, whose constructors register its wrappers. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  if (!dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_GLOBAL)) { fprintf(stderr, "%s\n", dlerror()); return 3; }
  void *h = dlopen(argv[1], RTLD_LAZY); /* calls into the runtime beyond registration are never made */
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  dlclose(h);
  return 0;
}
