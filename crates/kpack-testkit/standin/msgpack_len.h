/* The length of the msgpack object at p (the types the HIPK marker uses: kpack's markers
 * carry their digest as a bin 8), or 0 if unknown,
 * found by walking it as the HIP runtime's marker parser does. Shared by the stand-in HIP
 * runtimes: libamdhip64.c here and fixtures/platforms/win/amdhip64.c (Windows, no CRT). */
#ifndef KPACK_STANDIN_MSGPACK_LEN_H
#define KPACK_STANDIN_MSGPACK_LEN_H
#include <stddef.h>

static unsigned long long be(const unsigned char *p, int n) {
  unsigned long long v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

static size_t msgpack_len(const unsigned char *p, size_t avail) {
  if (avail == 0) return 0;
  unsigned char t = p[0];
  size_t head = 1, body = 0, items = 0;
  if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) return 1;
  if ((t & 0xe0) == 0xa0) body = t & 0x1f;
  else if ((t & 0xf0) == 0x90) items = t & 0x0f;
  else if ((t & 0xf0) == 0x80) items = 2 * (size_t)(t & 0x0f);
  else if ((t == 0xd9 || t == 0xc4) && avail >= 2) { head = 2; body = p[1]; }
  else if ((t == 0xda || t == 0xc5) && avail >= 3) { head = 3; body = be(p + 1, 2); }
  else if ((t == 0xdb || t == 0xc6) && avail >= 5) { head = 5; body = be(p + 1, 4); }
  else if (t == 0xdc && avail >= 3) { head = 3; items = be(p + 1, 2); }
  else if (t == 0xdd && avail >= 5) { head = 5; items = be(p + 1, 4); }
  else if (t == 0xde && avail >= 3) { head = 3; items = 2 * be(p + 1, 2); }
  else if (t == 0xdf && avail >= 5) { head = 5; items = 2 * be(p + 1, 4); }
  else if (t >= 0xcc && t <= 0xcf) return 1 + ((size_t)1 << (t - 0xcc));
  else return 0;
  size_t len = head + body;
  for (size_t i = 0; i < items; i++) {
    if (len >= avail) return 0;
    size_t n = msgpack_len(p + len, avail - len);
    if (n == 0) return 0;
    len += n;
  }
  return len <= avail ? len : 0;
}

#endif
