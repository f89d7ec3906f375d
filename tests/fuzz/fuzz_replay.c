/* fuzz_replay.c: runs a fuzz target's LLVMFuzzerTestOneInput over corpus files.
 * Lets every build (gcc, ASan) replay the seed corpora without libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return perror(path), -1;
  size_t cap = 1 << 16, len = 0, got;
  uint8_t *buf = malloc(cap);
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf) return -1;
  uint8_t *exact = malloc(len ? len : 1); /* exact size, so ASan sees overreads */
  if (exact) {
    memcpy(exact, buf, len);
    LLVMFuzzerTestOneInput(exact, len);
  }
  free(exact);
  free(buf);
  return exact ? 0 : -1;
}

/* A file, or every file in a directory; returns the number run or -1. */
static int run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return perror(path), -1;
  if (!S_ISDIR(st.st_mode)) return run_file(path) == 0 ? 1 : -1;
  DIR *d = opendir(path);
  if (!d) return perror(path), -1;
  int n = 0;
  struct dirent *e;
  char full[4096];
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(full, sizeof full, "%s/%s", path, e->d_name);
    if (run_file(full) != 0) n = -1;
    if (n >= 0) n++;
  }
  closedir(d);
  return n;
}

int main(int argc, char **argv) {
  int total = 0;
  for (int i = 1; i < argc; i++) {
    int n = run_path(argv[i]);
    if (n < 0) return 1;
    total += n;
  }
  printf("replayed %d inputs\n", total);
  return total > 0 ? 0 : 1; /* an empty corpus is a mistake */
}
